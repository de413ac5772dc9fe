"""The compose runtime reports Docker's ``State.OOMKilled`` for the failure rules (``OomReports``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from launcher import api
from launcher.backends.compose.runtime import ContainerRuntime
from launcher.supervision.runtime import OomReports


@pytest.mark.parametrize(("state", "expected"), [({"ExitCode": 137, "OOMKilled": True}, True),
                                                 ({"ExitCode": 137, "OOMKilled": False}, False),
                                                 ({"ExitCode": 137}, False)])
def test_oom_killed_is_the_engines_state(state: dict[str, Any], expected: bool, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {}}}), "compose")
    runtime = ContainerRuntime(client=None, compose=[], workdir=tmp_path)
    monkeypatch.setattr(runtime, "_container", lambda task: SimpleNamespace(attrs={"State": state}, status="exited"))
    assert isinstance(runtime, OomReports)
    assert runtime.oom_killed(plan.tasks[0]) is expected


def test_a_removed_container_was_not_oom_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {}}}), "compose")
    runtime = ContainerRuntime(client=None, compose=[], workdir=tmp_path)
    monkeypatch.setattr(runtime, "_container", lambda task: None)
    assert runtime.oom_killed(plan.tasks[0]) is False
