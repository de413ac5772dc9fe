"""The supervisor process as its command starts it (a library caller is not lean: nothing is forked), not the
fork the ``tfcluster`` command makes: ``python -m launcher.backends.supervisor_process local DIR`` finds the
local backend through the registry and supervises the run to its end."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from helpers.paths import REPO
from helpers.polling import wait_for_condition
from launcher import api
from launcher.backends import supervisor_process
from launcher.backends.local.backend import LocalBackend
from launcher.supervision import harness
from launcher.supervision.status import State


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> Iterator[harness.StateDir]:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    spec = api.validate_data({"name": "h11-by-command", "roles": {"chief": {"command": [sys.executable, "-c", "pass"]}}},
                             backend="local")
    plan = api.plan(spec, "local", launching=True)
    directory = harness.StateDir.of(plan.backend, plan.name)
    directory.create(plan)
    yield directory
    harness.stop(directory, timeout=60)
    directory.remove()


def test_the_local_supervisor_started_by_its_command_runs_the_job_to_success(state: harness.StateDir) -> None:
    harness.start(state, supervisor_process.process(LocalBackend))
    wait_for_condition(lambda: (job := state.record.read_status()) is not None and job.state.terminal, timeout=180)
    job = state.record.read_status()
    assert job is not None and job.state is State.SUCCEEDED, (job, state.log.read_text())
