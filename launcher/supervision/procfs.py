"""What Linux's /proc says about a process: is it (still) ours, and stopping it.

Contract: ``runs(pid, marker)`` is True only for a live, non-zombie process
whose command line contains ``marker``, so a pid the system reused for
another program is never taken for ours; ``terminate`` sends SIGTERM and,
after ``timeout`` seconds, SIGKILL to such a process, and does nothing to
any other.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first, process group third), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def runs(pid: int, marker: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    fields = stat_fields(pid)
    return marker.encode() in cmdline and fields is not None and fields[0] != "Z"


def terminate(pid: int, marker: str, timeout: float) -> None:
    if not runs(pid, marker):
        return
    os.kill(pid, signal.SIGTERM)
    ends = time.monotonic() + timeout
    while runs(pid, marker) and time.monotonic() < ends:
        time.sleep(0.05)
    if runs(pid, marker):
        os.kill(pid, signal.SIGKILL)
