"""``adopt``: a dead supervisor's tasks attached, started again, left decided, or taken as lost."""

from __future__ import annotations

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.plan.targets import BackendKind
from launcher.protocol.exitcodes import LOST_EXIT
from launcher.supervision.adoption import adopt
from launcher.supervision.status import JobStatus, State, TaskStatus
from launcher.supervision.task_runs import TaskRuns

ROLES = {"chief": {}, "worker": {"replicas": 3}}


def test_each_task_is_attached_started_left_or_lost_by_what_the_last_status_and_the_runtime_say() -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": ROLES}))
    runtime = ScriptedRuntime({"job-worker-1": [None]}, adoptable={"job-chief-0": 0, "job-worker-1": 0})
    previous = JobStatus("job", BackendKind.LOCAL, State.RUNNING, tasks=[
        TaskStatus("job-chief-0", State.RUNNING, restarts=1),  # runs on: attached
        TaskStatus("job-worker-0", State.SUCCEEDED, exit_code=0),  # ended and decided: left as it was
        TaskStatus("job-worker-1", State.RESTARTING),  # was being restarted and runs: attached
        TaskStatus("job-worker-2", State.RUNNING),  # no trace: lost
    ])
    runs = TaskRuns(plan, runtime, lambda run, event: None)
    to_start, undecided = adopt(previous, runs)
    assert to_start == [] and undecided == [("job-worker-2", LOST_EXIT)]
    assert [run.task.name for run in runs.running()] == ["job-chief-0", "job-worker-1"]
    assert runs["job-chief-0"].status.restarts == 1 and runs["job-worker-0"].status.state is State.SUCCEEDED
    assert "left no trace" in runs["job-worker-2"].error() and runtime.adopted == ["job-chief-0", "job-worker-1"]


def test_a_task_being_started_without_a_live_run_is_started_again() -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": ROLES}))
    runtime = ScriptedRuntime({"job-worker-0": [143]}, adoptable={"job-worker-0": 0})
    previous = JobStatus("job", BackendKind.LOCAL, State.RESTARTING, tasks=[TaskStatus("job-worker-0", State.RESTARTING)])
    to_start, undecided = adopt(previous, TaskRuns(plan, runtime, lambda run, event: None))
    assert [run.task.name for run in to_start] == ["job-chief-0", "job-worker-0", "job-worker-1", "job-worker-2"]
    assert undecided == []
