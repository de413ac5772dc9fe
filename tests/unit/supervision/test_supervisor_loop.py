"""The supervision loop over a scripted runtime: deadline, linger, cancel, start failures, runtime faults, adoption."""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.protocol.events import MANUAL_TOKEN
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.supervision.backoff import NotNow
from launcher.supervision.goodput import LostSeconds
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import CLIP_MARK, JobStatus, State, TaskStatus
from launcher.supervision.supervisor import RESTART_STOP_SECONDS, STOP_SECONDS, Supervisor
from launcher.supervision.task_runs import LAST_ERROR_CHARS
from launcher.supervision.tuning import Tuning

MWMS = {"chief": {}, "worker": {"replicas": 2}}
#: The start of an event line of these plans (``api.plan`` without launching: the fixed token).
EVENT_PREFIX = f"TFCLUSTER_EVENT/{MANUAL_TOKEN} "
STEP = '{"event":"step","task":"job-chief-0","time":1,"step":7}'
PSS = {"chief": {}, "worker": {"replicas": 1}, "ps": {}}
#: Seconds between a suspected stall's two stack samples here (the scripted tasks answer at once).
GAP = 0.01


def supervise(runtime: ScriptedRuntime, roles: dict[str, Any] = MWMS, **kwargs: Any) -> tuple[JobStatus, list[JobStatus]]:
    fields = {k: kwargs.pop(k) for k in ("deadline_seconds", "restart") if k in kwargs}
    plan = api.plan(api.validate_data({"name": "job", "roles": roles, **fields}))
    published: list[JobStatus] = []
    tuning = Tuning(**{"poll_seconds": 0.01, "linger_seconds": 0.0, "fault_pause": 0.0, **kwargs})
    status = Supervisor(plan, runtime, on_status=published.append, tuning=tuning).run()
    return status, published


def test_deadline_fails_the_job_and_stops_every_task() -> None:
    runtime = ScriptedRuntime({})  # every task runs forever
    status, _ = supervise(runtime, deadline_seconds=1)
    assert status.state is State.FAILED and "deadline of 1 s exceeded" in status.message
    assert sorted(runtime.stopped) == ["job-chief-0", "job-worker-0", "job-worker-1"]
    assert all(t.state is State.CANCELLED for t in status.tasks)


def test_after_success_the_others_linger_then_are_stopped() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0]})
    status, _ = supervise(runtime, linger_seconds=0.3)
    assert status.state is State.SUCCEEDED
    assert sorted(runtime.stopped) == ["job-worker-0", "job-worker-1"]
    assert {t.name: t.state for t in status.tasks}["job-chief-0"] is State.SUCCEEDED


def test_tasks_that_end_by_themselves_during_the_linger_are_not_stopped() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0], "job-worker-0": [(5, 0)], "job-worker-1": [0]})
    status, _ = supervise(runtime, linger_seconds=5.0)
    assert status.state is State.SUCCEEDED and runtime.stopped == []


def test_cancel_from_another_thread_stops_everything() -> None:
    runtime = ScriptedRuntime({})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))
    running = threading.Event()
    supervisor = Supervisor(plan, runtime, on_status=lambda s: s.state is State.RUNNING and running.set(), tuning=Tuning(poll_seconds=0.01))
    canceller = threading.Thread(target=lambda: running.wait(60) and supervisor.cancel())
    canceller.start()
    status = supervisor.run()
    canceller.join()
    assert status.state is State.CANCELLED
    assert sorted(runtime.stopped) == ["job-chief-0", "job-worker-0", "job-worker-1"]
    assert runtime.graces == [60]  # a notice: the tasks get checkpoint.save_grace_seconds to save


def test_leave_ends_the_supervision_leaving_every_task_running_and_the_last_status_standing() -> None:
    """A supervisor moved elsewhere (its pod deleted) stops nothing and publishes no end: the next one adopts."""
    runtime = ScriptedRuntime({})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))
    published: list[JobStatus] = []
    running = threading.Event()

    def publish(status: JobStatus) -> None:
        published.append(status)
        if status.state is State.RUNNING:
            running.set()

    supervisor = Supervisor(plan, runtime, on_status=publish, tuning=Tuning(poll_seconds=0.01))
    leaver = threading.Thread(target=lambda: running.wait(60) and supervisor.leave())
    leaver.start()
    status = supervisor.run()
    leaver.join()
    assert runtime.stopped == [] and status.state is State.RUNNING
    assert published[-1].state is State.RUNNING and all(t.state is State.RUNNING for t in published[-1].tasks)


def test_a_task_that_cannot_start_fails_the_job_before_it_runs() -> None:
    started: list[bool] = []
    runtime = ScriptedRuntime({}, unstartable=["job-worker-1"])
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))
    status = Supervisor(plan, runtime, on_started=lambda: started.append(True), tuning=Tuning(poll_seconds=0.01)).run()
    assert status.state is State.FAILED and "cannot start job-worker-1" in status.message
    assert not started, "on_started must not be called when a task could not start"


def test_a_transient_runtime_fault_is_retried_without_failing_the_job() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0]}, faults=2)
    status, _ = supervise(runtime, fault_retries=3)
    assert status.state is State.SUCCEEDED, status.message


def test_a_persistent_runtime_fault_fails_the_job_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    runtime = ScriptedRuntime({}, faults=100)
    status, published = supervise(runtime, fault_retries=3)
    assert status.state is State.FAILED
    assert "the runtime failed 3 times in a row: ConnectionError: Connection aborted" in status.message
    assert published[-1].state is State.FAILED
    err = capsys.readouterr().err
    assert err.count("supervisor: runtime error") == 3 and "Traceback" not in err
    assert runtime.stopped, "the supervisor still tries to stop the tasks"


def test_an_engine_that_throttles_gets_rounds_backed_off_by_its_retry_after_and_counts_no_fault(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The runtime's engine answers 429 with ``Retry-After: 7`` to four polls in a row (``NotNow``): each next round
    waits 7 s (more than the doubled poll pause), none is a fault (3 would fail the job), and from the first poll
    that answers the rounds are back at ``poll_seconds``; one line says so each way."""
    pauses: list[float] = []
    runtime = ScriptedRuntime({"job-chief-0": [(8, 0)]}, faults=4, fault=NotNow("429 Too Many Requests", 7.0))
    status, _ = supervise(runtime, fault_retries=3, pause=pauses.append)
    assert status.state is State.SUCCEEDED, status.message
    assert pauses[:4] == [7.0] * 4 and set(pauses[4:]) == {0.01}
    err = capsys.readouterr().err
    assert err.count("cannot reach its engine now (rounds back off): NotNow: 429 Too Many Requests") == 1
    assert err.count("reaches its engine again") == 1 and "runtime error" not in err


def test_a_round_backed_off_by_an_engine_that_throttles_never_pauses_past_the_deadline() -> None:
    """Every poll meets ``NotNow`` asking for 30 s (``Retry-After``) while the deadline is 1 s away: each pause is
    cut to what is left of the deadline, and the job fails of its deadline, not 30 s later."""
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(min(seconds, 0.05))

    runtime = ScriptedRuntime({}, faults=10**6, fault=NotNow("429 Too Many Requests", 30.0))
    status, _ = supervise(runtime, deadline_seconds=1, pause=pause)
    assert status.state is State.FAILED and "deadline of 1 s exceeded" in status.message, status.message
    assert pauses and max(pauses) <= 1.0, pauses


def test_a_fault_while_stopping_is_logged_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    class BrokenStop(ScriptedRuntime):
        def stop(self, tasks: Any, grace_seconds: float) -> None:
            raise ConnectionError("engine gone")

    status, _ = supervise(BrokenStop({}), deadline_seconds=1)
    assert status.state is State.FAILED and "deadline" in status.message
    assert "cannot stop the remaining tasks: ConnectionError: engine gone" in capsys.readouterr().err


def test_a_status_that_cannot_be_written_is_logged_once_and_the_supervision_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    """A store that refuses the status (an API server's 422, a full disk) for a while: the job runs to its true end,
    the failure is one line, and the status is written once the store takes it again."""
    refusals = iter(range(6))
    written: list[JobStatus] = []

    def on_status(status: JobStatus) -> None:
        if next(refusals, None) is not None:
            raise LaunchError('cannot update ConfigMap job-config: ConfigMap "job-config" is invalid: []: Too long')
        written.append(status)

    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))
    status = Supervisor(plan, ScriptedRuntime({"job-chief-0": [(10, 0)]}), on_status=on_status,
                        tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()
    assert status.state is State.SUCCEEDED, status.message
    assert written and written[-1].state is State.SUCCEEDED
    err = capsys.readouterr().err
    assert err.count("supervisor: cannot publish the status") == 1 and "Traceback" not in err, err


def test_the_jobs_end_is_published_though_the_store_refuses_it_at_first() -> None:
    ends: list[State] = []  # each attempt to write the job's end
    runtime = ScriptedRuntime({"job-chief-0": [0]})

    def on_status(status: JobStatus) -> None:
        if status.state.terminal:
            ends.append(status.state)
            if len(ends) == 1:
                raise LaunchError("cannot update ConfigMap job-config: it changed again while it was written (409 twice)")

    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))
    status = Supervisor(plan, runtime, on_status=on_status, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()
    assert status.state is State.SUCCEEDED and ends == [State.SUCCEEDED, State.SUCCEEDED]


def test_a_megabyte_error_line_makes_a_bounded_last_error_and_message() -> None:
    line = "E" * (1024 * 1024)
    runtime = ScriptedRuntime({"job-chief-0": [1]}, output={"job-chief-0": [line]})
    status, published = supervise(runtime, restart={"max_restarts": 0})
    assert status.state is State.FAILED
    assert "last error: " + "E" * 100 in status.message and status.message.endswith(CLIP_MARK)
    assert len(status.message) < LAST_ERROR_CHARS + 200, len(status.message)
    assert all(len(json.dumps(p.to_dict())) < 20 * LAST_ERROR_CHARS for p in published)


def test_pss_worker_restart_leaves_the_others_running() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [137, None], "job-chief-0": [(20, 0)]})
    status, published = supervise(runtime, PSS)
    assert status.state is State.SUCCEEDED
    assert runtime.runs == {"job-chief-0": 0, "job-worker-0": 1, "job-ps-0": 0}
    assert any(p.state is State.RESTARTING for p in published)


def test_progress_comes_from_the_lead_task_only() -> None:
    event = EVENT_PREFIX + '{"event":"step","task":"%s","time":1,"step":%d,"loss":0.5}'
    runtime = ScriptedRuntime({"job-chief-0": [(3, 0)]},
                              output={"job-chief-0": [event % ("job-chief-0", 7)], "job-worker-0": [event % ("job-worker-0", 99)]})
    status, _ = supervise(runtime)
    assert status.progress.step == 7


def test_a_plan_from_before_event_tokens_reads_no_event_and_so_judges_no_stall() -> None:
    """A supervisor of this version adopting a job an older one launched: its tasks' lines carry no token."""
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS}))  # the built-in entrypoint: it reports steps
    old = Plan.model_validate_json(plan.model_dump_json(exclude={"event_token"}))
    assert old.event_token == "" and old.tasks == plan.tasks
    runtime = ScriptedRuntime({"job-chief-0": [(3, 0)]}, output={"job-chief-0": ["TFCLUSTER_EVENT " + STEP]})  # as it wrote them
    status = Supervisor(old, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0)).run()
    assert status.stall is not None and not status.stall.watching and status.progress.step is None
    assert Supervisor(plan, ScriptedRuntime({})).status().stall.watching  # type: ignore[union-attr]


def test_each_task_shows_its_last_line_of_output_but_not_events() -> None:
    output = {"job-worker-0": ["epoch 1/3 loss 0.5", "", EVENT_PREFIX + '{"event":"step","task":"job-worker-0","time":1}'],
              "job-chief-0": ["x" * 500]}
    runtime = ScriptedRuntime({"job-chief-0": [(3, 0)]}, output=output)
    status, published = supervise(runtime)
    last = {t.name: t.last_line for t in published[-1].tasks}
    assert last == {"job-chief-0": "x" * 200, "job-worker-0": "epoch 1/3 loss 0.5", "job-worker-1": ""}
    assert JobStatus.from_dict(status.to_dict()) == status


# -- adoption: a new supervisor takes over from one that died --------------------------------------------------


def adopt(runtime: ScriptedRuntime, previous: JobStatus, pause: Callable[[float], None] | None = None,
          **fields: Any) -> JobStatus:
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, **fields}))
    return Supervisor(plan, runtime, resume=previous,
                      tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, pause=pause)).run()


#: When the killed supervisor's job started (unix seconds): long ago, which only a deadline reads.
STARTED_AT = 1_700_000_000.0


def died(restarts: int = 0, **states: State) -> JobStatus:
    """The last status a supervisor published before it was killed: every task running unless ``states`` says."""
    names = ["job-chief-0", "job-worker-0", "job-worker-1"]
    tasks = [TaskStatus(n, states.get(n.replace("-", "_"), State.RUNNING), restarts) for n in names]
    return JobStatus("job", BackendKind.LOCAL, State.RUNNING, tasks, restarts=restarts, started_at=STARTED_AT)


ALL_IN_RUN_1 = {"job-chief-0": 1, "job-worker-0": 1, "job-worker-1": 1}


def test_adoption_does_not_restart_the_running_tasks() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0, (3, 0)]}, adoptable=ALL_IN_RUN_1)
    status = adopt(runtime, died(restarts=1))
    assert status.state is State.SUCCEEDED, status.message
    assert sorted(runtime.adopted) == sorted(ALL_IN_RUN_1) and runtime.runs == ALL_IN_RUN_1, "a task was started again"
    assert status.restarts == 1 and all(t.restarts == 1 for t in status.tasks)


def test_an_engine_out_while_adopting_is_waited_out_backed_off_not_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """The engine throttles (``NotNow``, ``Retry-After: 4``) the first two polls of the adoption (a task the dead
    supervisor was restarting is polled there): the adoption is tried again after each pause, and the job runs to
    its end; one line says so each way."""
    pauses: list[float] = []
    runtime = ScriptedRuntime({"job-worker-1": [None], "job-chief-0": [(3, 0)]}, adoptable=ALL_IN_RUN_1,
                              faults=2, fault=NotNow("429 Too Many Requests", 4.0))
    status = adopt(runtime, died(job_worker_1=State.RESTARTING), pause=pauses.append)
    assert status.state is State.SUCCEEDED, status.message
    assert pauses[:2] == [4.0, 4.0] and set(pauses[2:]) == {0.01}
    assert runtime.runs == ALL_IN_RUN_1, "a task was started again"
    err = capsys.readouterr().err
    assert err.count("cannot reach its engine now (rounds back off): NotNow: 429 Too Many Requests") == 1, err
    assert err.count("reaches its engine again") == 1 and "runtime error" not in err


def test_adoption_carries_the_used_restart_budget_on() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [137, (2, 137)]}, adoptable=ALL_IN_RUN_1)
    previous = died(restarts=1)
    previous.preemptions = 2
    status = adopt(runtime, previous, restart={"max_restarts": 1})
    assert status.preemptions == 2
    assert status.state is State.FAILED and "restart budget (1) is used up" in status.message, status.message
    assert runtime.runs == ALL_IN_RUN_1


def test_adoption_restarts_with_the_budget_that_is_left() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [137, (2, 137), None], "job-chief-0": [None, None, (3, 0)]},
                              adoptable=ALL_IN_RUN_1)
    status = adopt(runtime, died(restarts=1), restart={"max_restarts": 2})
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 2 and runtime.runs == {name: 2 for name in ALL_IN_RUN_1}


def test_adoption_measures_the_deadline_from_the_original_start() -> None:
    runtime = ScriptedRuntime({}, adoptable=ALL_IN_RUN_1)
    status = adopt(runtime, died(), deadline_seconds=60)  # started long before the 60 s
    assert status.state is State.FAILED and "deadline of 60 s exceeded" in status.message
    assert max(runtime.polls.values()) <= 1, "the deadline restarted from the adoption: it kept polling"
    assert sorted(runtime.stopped) == sorted(ALL_IN_RUN_1)


def test_runs_that_ended_unsupervised_are_decided_from_their_exit_codes() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0], "job-worker-0": [0], "job-worker-1": [0]},
                              adoptable={"job-chief-0": 0, "job-worker-0": 0, "job-worker-1": 0})
    status = adopt(runtime, died())
    assert status.state is State.SUCCEEDED and [t.exit_code for t in status.tasks] == [0, 0, 0]
    assert runtime.stopped == [] and runtime.runs == {"job-chief-0": 0, "job-worker-0": 0, "job-worker-1": 0}
    failed = adopt(ScriptedRuntime({"job-worker-1": [3]}, adoptable={"job-chief-0": 0, "job-worker-0": 0, "job-worker-1": 0}),
                   died(), restart={"policy": "never"})
    assert failed.state is State.FAILED and "job-worker-1 exited with code 3" in failed.message


def test_a_task_being_restarted_when_the_supervisor_died_is_started_not_counted_again() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None, (3, 0)], "job-worker-0": [137, None]},
                              adoptable={"job-chief-0": 1, "job-worker-0": 0, "job-worker-1": 1})
    status = adopt(runtime, died(restarts=1, job_worker_0=State.RESTARTING))
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1 and runtime.runs["job-worker-0"] == 1, "the worker must be started once, not restarted"


def test_a_running_task_without_a_trace_counts_as_killed_and_restarts_the_group() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None, None, (3, 0)]}, adoptable={"job-chief-0": 1, "job-worker-0": 1})
    status = adopt(runtime, died(restarts=1), restart={"max_restarts": 2})
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 2 and runtime.runs == {"job-chief-0": 2, "job-worker-0": 2, "job-worker-1": 0}


def test_preemptions_are_counted_apart_and_the_survivors_get_the_save_grace() -> None:
    """Worker 1 is preempted (143) twice: two group restarts, no restart used; the others were saving."""
    runtime = ScriptedRuntime({"job-chief-0": [None, None, 0], "job-worker-1": [143, 143, None]})
    status, _ = supervise(runtime, restart={"max_restarts": 0})
    assert status.state is State.SUCCEEDED, status.message
    assert (status.restarts, status.preemptions) == (0, 2)
    assert [t.preemptions for t in status.tasks] == [2, 2, 2] and all(t.restarts == 0 for t in status.tasks)
    assert runtime.graces[:2] == [60, 60]  # checkpoint.save_grace_seconds, the default


def test_a_failure_restart_stops_the_survivors_quickly() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None, 0], "job-worker-1": [137, None]})
    status, _ = supervise(runtime)
    assert status.state is State.SUCCEEDED and (status.restarts, status.preemptions) == (1, 0)
    assert runtime.graces[0] == RESTART_STOP_SECONDS < STOP_SECONDS  # the survivors cannot save


def _event(kind: str, task: str, **fields: Any) -> str:
    import json

    return EVENT_PREFIX + json.dumps({"event": kind, "task": task, "time": 0, **fields})


STUCK_IN_OP = [
    "Thread 0x00007f0000000001 (most recent call first):",
    '  File "/venv/lib/python3.11/site-packages/tensorflow/python/ops/script_ops.py", line 269 in __call__',
    "",
    "Current thread 0x00007f0000000002 (most recent call first):",
    '  File "/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute',
]
WAITING = ['Current thread 0x00007f0000000003 (most recent call first):', '  File "/x/execute.py", line 53 in quick_execute']


def test_a_stalled_job_dumps_every_task_names_the_suspect_and_restarts_the_group(tmp_path: Any) -> None:
    names = ["job-chief-0", "job-worker-0", "job-worker-1"]
    output = {name: [_event("stacks_on_signal", name, signal="SIGUSR1")] for name in names}
    output["job-chief-0"].append(_event("step", "job-chief-0", step=1))
    runtime = ScriptedRuntime({"job-chief-0": [None, 0]}, output=output,
                              stacks={"job-chief-0": WAITING, "job-worker-0": WAITING, "job-worker-1": STUCK_IN_OP})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path),
                        tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 1
    assert sorted(runtime.dumped) == sorted(names * 2)  # two samples
    assert status.stall is not None and status.stall.evidence is StallEvidence.STACKS_UNCHANGED
    assert status.stall is not None and status.stall.stalls == 1 and status.stall.suspects == ["job-worker-1"]
    assert status.stall.stacks_dir == str(tmp_path / "stall-1")
    assert "script_ops.py" in (tmp_path / "stall-1" / "job-worker-1.txt").read_text()
    assert "quick_execute" in (tmp_path / "stall-1" / "job-chief-0.txt").read_text()
    assert {t.name: t.restarts for t in status.tasks} == dict.fromkeys(names, 1)
    assert JobStatus.from_dict(status.to_dict()) == status


def test_a_user_program_without_step_reports_is_never_judged_stalled() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [(300, 0)]})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "command": ["python", "t.py"],
                                       "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.02, linger_seconds=0.0)).run()  # ~6 s: twice the allowance
    assert status.state is State.SUCCEEDED and status.restarts == 0 and runtime.dumped == []
    assert status.stall is not None and not status.stall.watching and status.stall.stalls == 0


def test_the_warn_action_only_reports_the_stall_and_a_task_without_the_handler_is_not_signalled() -> None:
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1")]}
    runtime = ScriptedRuntime({"job-chief-0": [(400, 0)]}, output=output, stacks={"job-chief-0": WAITING})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS,
                                       "stall": {"timeout_seconds": 1, "action": "warn"}}))
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.02, linger_seconds=0.0, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 0
    assert status.stall is not None and status.stall.stalls >= 1 and "job-chief-0" not in status.stall.suspects
    assert status.stall.evidence is StallEvidence.TIME_ONLY  # the chief's stacks stood still, nobody stood out
    assert set(runtime.dumped) == {"job-chief-0"}  # the workers never said they dump stacks on the signal
    assert runtime.read and set(runtime.read) == {"job-worker-0", "job-worker-1"}  # read from outside instead: nothing
    assert set(status.stall.suspects) == {"job-worker-0", "job-worker-1"}  # they gave none when asked


PYSPY_STUCK_IN_OP = """Process 4242: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 4243 (idle): "Thread-1"
    load_shard (/home/me/train.py:12)
    __call__ (/venv/lib/python3.11/site-packages/tensorflow/python/ops/script_ops.py:269)
Thread 4242 (idle): "MainThread"
    quick_execute (/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py:53)"""


def test_a_stall_reads_the_stacks_of_programs_without_the_handler_from_outside(tmp_path: Any) -> None:
    """The chief announced the handler and is signalled; the workers did not, and are read (py-spy on local)."""
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1"), _event("step", "job-chief-0", step=1)]}
    runtime = ScriptedRuntime({"job-chief-0": [None, 0]}, output=output, stacks={"job-chief-0": WAITING},
                              outside={"job-worker-1": PYSPY_STUCK_IN_OP})  # worker-0: its reader gives none
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path),
                        tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 1
    assert runtime.dumped == ["job-chief-0"] * 2 and sorted(runtime.read) == sorted(["job-worker-0", "job-worker-1"] * 2)
    assert status.stall is not None and status.stall.suspects == ["job-worker-1"]  # py-spy's frames show the op
    assert (tmp_path / "stall-1" / "job-worker-1.txt").read_text() == PYSPY_STUCK_IN_OP + "\n"
    assert "quick_execute" in (tmp_path / "stall-1" / "job-chief-0.txt").read_text()
    assert "no stacks" in (tmp_path / "stall-1" / "job-worker-0.txt").read_text()


class ReadsEveryProgram(ScriptedRuntime):
    """A ``ReadsEveryStack`` runtime (Kubernetes: each task's agent reads its program with py-spy)."""

    reads_every_stack = True


def test_a_runtime_that_reads_every_program_is_never_asked_to_signal_one(tmp_path: Any) -> None:
    """The chief announced the handler, but its runtime reads every program from outside: all three are read, none
    is signalled, and a stall's verdict comes from what was read."""
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1"), _event("step", "job-chief-0", step=1)]}
    runtime = ReadsEveryProgram({"job-chief-0": [None, 0]}, output=output, stacks={"job-chief-0": WAITING},
                                outside={"job-chief-0": PYSPY_STUCK_IN_OP.replace("script_ops", "x"),
                                         "job-worker-1": PYSPY_STUCK_IN_OP})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path),
                        tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, stack_gap=GAP)).run()
    assert runtime.dumped == []
    assert sorted(runtime.read) == sorted(["job-chief-0", "job-worker-0", "job-worker-1"] * 2)
    assert status.stall is not None and status.stall.suspects == ["job-worker-1"]


def test_a_signalled_dump_that_never_ends_is_kept_to_the_cap(tmp_path: Any) -> None:
    """A program whose dump runs to megabytes (thousands of threads, or stack-like lines it prints itself): what the
    supervisor keeps of one task's stacks is at most ``MAX_STACK_BYTES``, on every backend (the shared supervisor)."""
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1"), _event("step", "job-chief-0", step=1)]}
    endless = WAITING * (2 * MAX_STACK_BYTES // len("".join(WAITING)))
    runtime = ScriptedRuntime({"job-chief-0": [None, 0]}, output=output, stacks={"job-chief-0": endless})
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path), tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, stack_gap=GAP)).run()
    kept = (tmp_path / "stall-1" / "job-chief-0.txt").read_bytes()
    assert MAX_STACK_BYTES // 2 < len(kept) <= MAX_STACK_BYTES + 1  # + the file's newline
    assert kept.startswith(WAITING[0].encode())


def test_step_time_reports_of_every_training_task_name_the_straggler() -> None:
    def report(task: str, input_seconds: float) -> list[str]:
        return [_event("step_time", task, epoch=0, step=10, seconds_per_step=0.2, input_seconds_per_batch=input_seconds)]

    output = {"job-chief-0": report("job-chief-0", 0.002), "job-worker-0": report("job-worker-0", 0.003),
              "job-worker-1": report("job-worker-1", 0.09)}
    status, _ = supervise(ScriptedRuntime({"job-chief-0": [(3, 0)]}, output=output))
    assert [(s.task, s.seconds, s.median_seconds) for s in status.stragglers] == [("job-worker-1", 0.09, 0.003)]
    assert JobStatus.from_dict(status.to_dict()).stragglers == status.stragglers


def test_a_job_whose_stacks_move_is_never_restarted_however_long_it_is_silent() -> None:
    """A slow save or an evaluation: no report for many times the floor, the chief's frames change each time."""
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1"), _event("step", "job-chief-0", step=1)]}
    runtime = ScriptedRuntime({"job-chief-0": [(150, 0)]}, output=output, stacks={"job-chief-0": WAITING},
                              moving=["job-chief-0"], tick=0.1)  # 0.1 s of the stall clock per poll: 15 s
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, clock=runtime.clock, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 0, status.message
    assert status.stall is not None and status.stall.stalls == 0 and status.stall.evidence is StallEvidence.STACKS_MOVED
    assert status.stall.last_check.startswith("no progress for") and "stacks moved, not a stall" in status.stall.last_check
    assert runtime.dumped.count("job-chief-0") >= 4  # looked at more than once


def test_after_the_leads_finished_event_its_exit_gets_the_first_step_allowance() -> None:
    """The lead's ``finished`` reaches the stall clock: an exit of 2.5 s after its steps, floor 1 s, is not
    taken for a stall (the allowance is 3 x the floor, and no look comes before it)."""
    steps = [_event("step", "job-chief-0", step=n) for n in (1, 2, 3)]
    output = {"job-chief-0": [*steps, _event("finished", "job-chief-0")]}
    runtime = ScriptedRuntime({"job-chief-0": [(25, 0)]}, output=output, tick=0.1)  # exits 2.5 s after it finished
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}}, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, clock=runtime.clock, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 0, status.message
    assert status.stall is not None and status.stall.stalls == 0 and status.stall.evidence is None


ENOTCONN = OSError(errno.ENOTCONN, "Transport endpoint is not connected")


@pytest.mark.parametrize("where", ["stop_faults", "start_faults"])
def test_an_engine_fault_during_a_restart_is_retried_and_the_restart_completes_once(where: str) -> None:
    """Worker 1 dies; the Docker socket's ENOTCONN cuts the gang restart short: the next round finishes it."""
    runtime = ScriptedRuntime({"job-chief-0": [None, 0], "job-worker-1": [137, None]}, fault=ENOTCONN, **{where: 1})
    status, _ = supervise(runtime, fault_retries=3)
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1 and all(t.restarts == 1 for t in status.tasks), status
    assert runtime.runs == {"job-chief-0": 1, "job-worker-0": 1, "job-worker-1": 1}  # each started once again


def test_a_fault_that_is_not_the_engines_outside_a_poll_still_fails_the_job() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None, 0], "job-worker-1": [137, None]}, fault=ValueError("bug"),
                              stop_faults=1)
    status, _ = supervise(runtime, fault_retries=3)
    assert status.state is State.FAILED and "the runtime failed: ValueError: bug" in status.message


def test_an_engine_fault_while_reading_a_stall_s_stacks_is_retried(tmp_path: Any) -> None:
    output = {"job-chief-0": [_event("stacks_on_signal", "job-chief-0", signal="SIGUSR1"), _event("step", "job-chief-0", step=1)]}
    runtime = ScriptedRuntime({"job-chief-0": [None, 0]}, output=output, stacks={"job-chief-0": WAITING},
                              outside={"job-worker-1": PYSPY_STUCK_IN_OP}, fault=ENOTCONN, read_faults=1)
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "stall": {"timeout_seconds": 1}}))
    status = Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path),
                        tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0, stack_gap=GAP)).run()
    assert status.state is State.SUCCEEDED and status.restarts == 1, status.message
    assert status.stall is not None and status.stall.stalls == 1 and status.stall.suspects == ["job-worker-1"]


def test_a_fault_while_the_others_linger_after_success_keeps_the_success(capsys: pytest.CaptureFixture[str]) -> None:
    runtime = ScriptedRuntime({"job-chief-0": [0]}, faults=100, faults_after=3)  # the first round's polls pass
    status, _ = supervise(runtime, linger_seconds=5.0, fault_retries=3)
    assert status.state is State.SUCCEEDED, status.message
    assert sorted(runtime.stopped) == ["job-worker-0", "job-worker-1"]
    assert "runtime error while the others linger (3/3)" in capsys.readouterr().err


def test_every_status_carries_the_goodput_and_the_last_one_keeps_it_after_the_end() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [137, None], "job-chief-0": [(20, 0)]},
                              output={"job-chief-0": [EVENT_PREFIX + STEP]})
    status, published = supervise(runtime)
    assert status.state is State.SUCCEEDED and status.restarts == 1
    goodput = status.goodput
    assert goodput is not None and all(p.goodput is not None for p in published)
    assert goodput.productive_seconds + goodput.lost_seconds.total() == pytest.approx(goodput.wall_seconds, abs=0.01)
    assert published[-1].goodput == goodput, "the final status keeps the goodput until the job ended"
    document = status.to_dict()["goodput"]
    assert set(document["lost_seconds"]) == set(LostSeconds.model_fields)  # the names: test_goodput's json shape
    assert JobStatus.from_dict(status.to_dict()) == status


class StopWatcher(ScriptedRuntime):
    """A scripted runtime that records the statuses published before its first ``stop``."""

    def __init__(self, *args: Any, published: list[JobStatus], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.published, self.before_stop = published, None

    def stop(self, tasks: Any, grace_seconds: float) -> None:
        if self.before_stop is None:
            self.before_stop = list(self.published)
        super().stop(tasks, grace_seconds)


@pytest.mark.parametrize("how", ["succeeded", "failed", "deadline"])
def test_no_status_says_the_job_ended_before_its_running_tasks_were_stopped(how: str) -> None:
    published: list[JobStatus] = []
    exits: dict[str, list[int | tuple[int, int] | None]] = {
        "succeeded": {"job-chief-0": [0]}, "failed": {"job-worker-0": [3]}, "deadline": {}}[how]
    runtime = StopWatcher(exits, published=published)
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, "restart": {"max_restarts": 0},
                                       **({"deadline_seconds": 1} if how == "deadline" else {})}))
    status = Supervisor(plan, runtime, on_status=published.append, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()
    assert status.state.terminal and runtime.before_stop is not None
    assert not any(s.state.terminal for s in runtime.before_stop), [s.state for s in runtime.before_stop]
    assert published[-1].state is status.state and not any(t.state is State.RUNNING for t in published[-1].tasks)
