"""The harness's notice (Slurm's USR1 warning) on real processes: every task stops, the job is handed back and its
status says it runs again, never that it ended; a hand-back that fails, and a backend refusing to run the job,
end it failed with one line. Slurm's real cluster runs the same path (``test_slurm.py``'s time-limit warning)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from helpers.noticed_backend import HANDED_BACK, PROCESS
from helpers.paths import REPO
from helpers.polling import wait_for_condition
from launcher import api
from launcher.errors import LaunchError
from launcher.supervision import harness
from launcher.supervision.status import State

SLEEP = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> Iterator[harness.StateDir]:
    """A cluster of one sleeping task, its supervisor process able to import this test's backend."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(REPO / "tests")]))
    spec = api.validate_data({"name": "noticed", "roles": {"chief": {"command": SLEEP}}}, backend="local")
    plan = api.plan(spec, "local", launching=True)
    directory = harness.StateDir.of(plan.backend, plan.name)
    directory.create(plan)
    yield directory
    harness.stop(directory, timeout=60)


def notice(state: harness.StateDir) -> None:
    harness.start(state, PROCESS)
    pid = state.supervisor()
    assert pid is not None
    os.kill(pid, signal.SIGUSR1)
    wait_for_condition(lambda: state.supervisor() is None, timeout=120)


def test_a_notice_stops_every_task_and_hands_the_job_back_its_status_restarting(state: harness.StateDir) -> None:
    notice(state)
    job = state.record.read_status()
    assert job is not None and job.state is State.RESTARTING and job.message == "handed back: runs again later", job
    assert (state.root / HANDED_BACK).exists()
    assert "noticed: handing back" in state.log.read_text()


def test_a_hand_back_that_fails_ends_the_job_failed_in_one_line(state: harness.StateDir) -> None:
    (state.root / "refuse").touch()
    notice(state)
    job = state.record.read_status()
    assert job is not None and job.state is State.FAILED, job
    assert job.message == "failed: every task saved, but it could not be handed back: the queue refused"
    assert "Traceback" not in state.log.read_text()


def test_a_backend_refusing_to_run_the_job_fails_it_from_the_status_it_gave(state: harness.StateDir) -> None:
    (state.root / "cannot").touch()
    with pytest.raises(LaunchError, match="no room"):
        harness.start(state, PROCESS)
    job = state.record.read_status()
    assert job is not None and job.state is State.FAILED and job.message == "failed: no room" and job.preemptions == 3
