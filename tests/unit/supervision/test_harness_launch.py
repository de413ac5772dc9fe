"""One cleanup rule for a launch: undo after a failed start or a Ctrl-C before every task ran, never after."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.backends import supervisor_process
from launcher.backends.local.backend import LocalBackend
from launcher.errors import LaunchError
from launcher.supervision import harness


@pytest.mark.parametrize(("raised", "every_task_ran", "undone"), [
    (KeyboardInterrupt, False, True),   # nothing half-started stays
    (KeyboardInterrupt, True, False),   # the cluster runs: the caller stops it and keeps its logs
    (LaunchError, False, True),
    (LaunchError, True, True),          # a failed start is undone whatever ran
])
def test_launch_undoes_only_what_did_not_fully_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     raised: type[BaseException], every_task_ran: bool,
                                                     undone: bool) -> None:
    state = harness.StateDir(tmp_path)
    if every_task_ran:
        state.started.touch()

    def start(state: harness.StateDir, supervisor: harness.Process) -> None:
        raise raised("interrupted")

    monkeypatch.setattr(harness, "start", start)
    undo: list[bool] = []
    with pytest.raises(raised):
        harness.launch(state, supervisor_process.process(LocalBackend), lambda: undo.append(True))
    assert bool(undo) is undone
