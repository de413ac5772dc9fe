"""``slurmctl``'s signals to a job or step that ended meanwhile, with a stand-in ``scancel`` on PATH.

Slurm's scancel exits ``ESLURM_ALREADY_DONE`` (2021) as an 8-bit status, 229, with nothing on stderr when
``down`` signals a batch step that is completing (seen on the real cluster: ``scancel --batch: exit 229``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from launcher.backends.slurm import slurmctl


def scancel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int, stderr: str = "") -> None:
    script = tmp_path / "scancel"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{stderr}' >&2\nexit {status}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("status, stderr", [(229, ""), (1, "scancel: error: Kill job error on job id 7: Job/step "
                                                              "already completing or completed")])
def test_a_batch_step_or_step_that_ended_meanwhile_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                status: int, stderr: str) -> None:
    scancel(tmp_path, monkeypatch, status, stderr)
    slurmctl.signal_batch("7", "TERM")
    slurmctl.signal_step("7.0", "TERM")


def test_any_other_refusal_still_fails_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scancel(tmp_path, monkeypatch, 1, "scancel: error: Kill job error on job id 7: Access/permission denied")
    with pytest.raises(slurmctl.Refused, match="^scancel --batch: scancel: error: .*Access/permission denied$"):
        slurmctl.signal_batch("7", "TERM")
