"""A local standby (``launcher.worker.standby`` called on its stdin) imports at ``SCHED_IDLE`` in a thread of its
own: the main thread, which becomes the task, keeps the normal priority, which an unprivileged process could not
take back (``RLIMIT_NICE``: a restarted task would train at idle priority)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

#: How long the standby may take to start its import thread on a loaded host (it is found at once on an idle one).
START_SECONDS = 120.0


def _policies(pid: int) -> dict[int, int]:
    """``{thread id: scheduling policy}`` of the process's threads (those that ended meanwhile left out)."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            found[int(tid)] = os.sched_getscheduler(int(tid))
        except ProcessLookupError:
            continue
    return found


def test_the_standby_imports_in_an_idle_thread_and_its_main_thread_keeps_the_normal_priority() -> None:
    standby = subprocess.Popen([sys.executable, "-m", "launcher.worker.standby"], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert standby.stdin is not None
    try:
        ends = time.monotonic() + START_SECONDS
        policies = _policies(standby.pid)
        while os.SCHED_IDLE not in policies.values() and standby.poll() is None and time.monotonic() < ends:
            time.sleep(0.01)
            policies = _policies(standby.pid)
        assert os.SCHED_IDLE in policies.values(), f"no thread imports at idle priority: {policies}"
        assert policies[standby.pid] == os.SCHED_OTHER, "the main thread, the task's, was lowered to idle priority"
    finally:
        standby.stdin.close()  # end of file before the call: it ends at once with 0
        code = standby.wait(timeout=START_SECONDS)
    assert code == 0
