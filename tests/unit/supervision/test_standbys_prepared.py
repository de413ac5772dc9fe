"""When the supervisor prepares the standbys (``Standbys.prepare``): as soon as the tasks they stand by for have
started, at the launch and after each restart, before any step (a failure early in a run finds them imported)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.plan.planner import Task
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

MWMS = {"chief": {}, "worker": {"replicas": 2}}
TASKS = ["job-chief-0", "job-worker-0", "job-worker-1"]


class StandbyRuntime(ScriptedRuntime):
    """A scripted runtime that keeps standbys: ``calls`` is every start and prepare, in order."""

    def __init__(self, *args, prepare_faults: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list[str]]] = []
        self.prepare_faults = prepare_faults

    def start(self, task: Task) -> None:
        super().start(task)
        self.calls.append(("start", [task.name]))

    def prepare(self, tasks: Sequence[Task]) -> None:
        self.calls.append(("prepare", [t.name for t in tasks]))
        self._fault("prepare_faults")


def supervise(runtime: StandbyRuntime, **spec: object) -> JobStatus:
    plan = api.plan(api.validate_data({"name": "job", "roles": MWMS, **spec}), "local")
    assert [t.name for t in plan.tasks if t.standby_command] == TASKS
    return Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()


def test_the_standbys_are_prepared_once_the_tasks_have_started_before_any_step() -> None:
    runtime = StandbyRuntime({"job-chief-0": [(3, 0)]})  # no task ever reports a step
    status = supervise(runtime)
    assert status.state is State.SUCCEEDED, status.message
    assert runtime.calls == [*(("start", [t]) for t in TASKS), ("prepare", TASKS)]


def test_a_restart_prepares_standbys_again_as_soon_as_its_tasks_have_started() -> None:
    runtime = StandbyRuntime({"job-worker-1": [(2, 137), None], "job-chief-0": [None, (3, 0)]})
    status = supervise(runtime)
    assert status.state is State.SUCCEEDED and status.restarts == 1, status.message
    launch = [*(("start", [t]) for t in TASKS), ("prepare", TASKS)]
    assert runtime.calls == launch + launch  # the gang restart became the standbys, then new ones are made


def test_a_fault_preparing_the_standbys_is_logged_and_the_job_runs_on(capsys: pytest.CaptureFixture[str]) -> None:
    runtime = StandbyRuntime({"job-chief-0": [(3, 0)]}, prepare_faults=1)
    status = supervise(runtime)
    assert status.state is State.SUCCEEDED, status.message
    assert "no standbys: ConnectionError" in capsys.readouterr().err
