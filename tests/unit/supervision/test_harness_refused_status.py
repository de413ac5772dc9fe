"""The supervisor process's own status writes (a job failed before it ran, the status after a termination notice)
go through the one ``Publisher`` its loop writes through: a store refusing them is logged in one line, and the
process still ends as it says (its exit code), never with a traceback."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from helpers.in_process_supervisor import handlers_restored, run_then_signal
from launcher import api
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.run_store import RunFiles
from launcher.supervision.status import JobStatus

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1)
REFUSAL = "No space left on device"


@pytest.fixture(autouse=True)
def _signals_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``run_supervisor`` installs the supervisor process's handlers (and a wakeup fd) in this process: put them back."""
    monkeypatch.setattr(harness, "FAULT_PAUSE_SECONDS", 0.0)
    with handlers_restored(SIGNALS):
        yield


class RefusingFiles(RunFiles):
    """A run's record in files whose store refuses every status (a full disk)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.refused = 0

    def write_status(self, status: JobStatus) -> None:
        self.refused += 1
        raise OSError(28, REFUSAL)


def refusing_state(tmp_path: Path) -> tuple[harness.StateDir, RefusingFiles]:
    store = RefusingFiles(tmp_path / "state")
    state = harness.StateDir(tmp_path / "state", record=store)
    state.create(api.plan(api.validate_data({"name": "job", "roles": {"chief": {}}})))
    return state, store


def test_a_job_failed_before_it_ran_ends_1_when_its_status_is_refused(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    state, store = refusing_state(tmp_path)

    def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        raise harness.CannotRun("no room")

    assert harness.run_supervisor(state, host) == 1
    assert store.refused == harness.FAULT_RETRIES
    err = capsys.readouterr().err
    assert err.count(REFUSAL) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("hand_back", ["done", "refused"])
def test_the_status_after_a_notice_refused_ends_the_process_as_it_says(tmp_path: Path, hand_back: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    state, _ = refusing_state(tmp_path)

    def then() -> None:
        if hand_back == "refused":
            raise LaunchError("the queue refused")

    def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        notice = harness.Notice(signal.SIGUSR1, message="handed back", said="handing back", then=then,
                                failed="could not be handed back")
        return harness.Hosted(plan=plan, runtime=ScriptedRuntime({}), notice=notice)

    code = run_then_signal(state, host, signal.SIGUSR1)
    assert code == (0 if hand_back == "done" else 1)
    err = capsys.readouterr().err
    assert REFUSAL in err and "Traceback" not in err, err
