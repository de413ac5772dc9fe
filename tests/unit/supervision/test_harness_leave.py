"""The supervisor process of a backend whose supervisor moves (the Kubernetes supervisor pod, ``Hosted.leave_on_sigterm``):
SIGTERM leaves every task running and its last status standing, and the process exits 143 (so the pod's Job runs the
next supervisor, which adopts the tasks); without it, SIGTERM cancels the job, as on every other backend."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from helpers.in_process_supervisor import handlers_restored, run_then_signal
from launcher import api
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.status import State

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)


@pytest.fixture(autouse=True)
def _signals_restored() -> Iterator[None]:
    """``run_supervisor`` installs the supervisor process's handlers (and a wakeup fd) in this process: put them back."""
    with handlers_restored(SIGNALS):
        yield


def supervise_until_sigterm(tmp_path: Path, leave: bool) -> tuple[int, ScriptedRuntime, harness.StateDir]:
    """``run_supervisor`` over tasks that run until stopped; SIGTERM to this process once every task started."""
    state = harness.StateDir(tmp_path / "state")
    state.create(api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}}})))
    runtime = ScriptedRuntime({})

    def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        return harness.Hosted(plan=plan, runtime=runtime, leave_on_sigterm=leave)

    return run_then_signal(state, host, signal.SIGTERM), runtime, state


def test_sigterm_to_a_supervisor_that_leaves_stops_nothing_and_exits_143(tmp_path: Path) -> None:
    code, runtime, state = supervise_until_sigterm(tmp_path, leave=True)
    assert code == 128 + signal.SIGTERM and runtime.stopped == []
    status = state.record.read_status()
    assert status is not None and status.state is State.RUNNING  # what the next supervisor adopts from


def test_without_it_sigterm_cancels_the_job_and_stops_every_task(tmp_path: Path) -> None:
    code, runtime, state = supervise_until_sigterm(tmp_path, leave=False)
    assert code == 1 and sorted(runtime.stopped) == ["job-chief-0", "job-worker-0"]
    status = state.record.read_status()
    assert status is not None and status.state is State.CANCELLED
