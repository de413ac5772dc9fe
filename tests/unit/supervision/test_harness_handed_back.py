"""A supervisor whose job the backend handed on while SIGTERM ended it (Slurm: an administrator's ``scontrol
requeue``) says the job restarts, never that it was cancelled: the next allocation's supervisor may already have
written its own status, which a late "cancelled" would end for every reader (a test on the real Slurm cluster saw
it once, on a loaded machine). A SIGTERM with nothing handed on still cancels."""

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

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _signals_restored() -> Iterator[None]:
    with handlers_restored(SIGNALS):
        yield


@pytest.mark.parametrize(("handed_on", "state"), [("requeued by the controller", State.RESTARTING),
                                                    (None, State.CANCELLED)])
def test_sigterm_cancels_unless_the_backend_says_the_job_was_handed_on(tmp_path: Path, handed_on: str | None,
                                                                      state: State) -> None:
    files = harness.StateDir(tmp_path / "state")
    files.create(api.plan(api.validate_data({"name": "job", "roles": {"chief": {}}})))

    def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        return harness.Hosted(plan=plan, runtime=ScriptedRuntime({"job-chief-0": [None] * 10_000}),
                              handed_back=lambda: handed_on)

    run_then_signal(files, host, signal.SIGTERM)
    status = files.record.read_status()
    assert status is not None and status.state is state, status
    assert status.message == (handed_on or "cancelled")
