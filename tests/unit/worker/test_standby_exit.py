"""A zygote's standby (``launcher.worker.standby``) ends as the task the zygote forked for it ended: with its exit
code, or killed by the same signal, SIGKILL included (a crash, the OOM killer), for which no handler can be set:
the runtime records 128+N as for any task."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from helpers.paths import REPO


@pytest.mark.parametrize("code", [-signal.SIGKILL, -signal.SIGTERM, -signal.SIGSEGV, 3, 0])
def test_a_standby_ends_as_its_forked_task_did_even_one_killed_by_sigkill(code: int) -> None:
    ended = subprocess.run([sys.executable, "-c", f"from launcher.worker.standby import _exit_as; _exit_as({code})"],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (ended.returncode, ended.stderr) == (code, ""), ended.stderr
