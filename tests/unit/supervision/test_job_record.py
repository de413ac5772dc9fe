"""``JobRecord``: the job's counters, state and goodput as the supervisor keeps them."""

from __future__ import annotations

from launcher import api
from launcher.supervision.job_record import JobRecord
from launcher.supervision.rules import Action, Decision, Used
from launcher.supervision.status import JobStatus, State, TaskStatus


def record() -> JobRecord:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}}}))
    return JobRecord(plan, watching=True)


def test_a_restart_counts_on_the_job_and_each_task_restarted_and_a_preemption_apart() -> None:
    job, tasks = record(), [TaskStatus("job-chief-0", State.RUNNING), TaskStatus("job-worker-0", State.RUNNING)]
    job.restarted(Decision(Action.RESTART, restart=("job-chief-0", "job-worker-0")), tasks)
    job.restarted(Decision(Action.RESTART, restart=("job-worker-0",), preemption=True), tasks[1:])
    assert job.used() == Used(restarts=1, preemptions=1)
    assert [(t.restarts, t.preemptions) for t in tasks] == [(1, 0), (1, 1)]


def test_the_end_is_stamped_once_and_a_status_shares_nothing_mutable() -> None:
    job = record()
    job.set(State.FAILED, "failed: x")
    first = job.status([TaskStatus("job-chief-0", State.FAILED)])
    job.set(State.FAILED, "failed: y")
    second = job.status([])
    assert first.goodput is not None and second.goodput is not None
    assert first.goodput.wall_seconds == second.goodput.wall_seconds  # as of the end, not of now
    assert first.stall is not None and first.stall is not job.job.stall


def test_an_adopted_job_carries_its_counters_and_start_on() -> None:
    job = record()
    job.adopted(JobStatus("job", job.job.backend, State.RUNNING, restarts=2, preemptions=1, started_at=100.0))
    assert job.used() == Used(2, 1) and job.job.started_at == 100.0
