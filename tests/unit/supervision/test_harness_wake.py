"""``wake_supervisor`` ends the supervisor's pause between poll rounds at once, from another thread (a Kubernetes
pod's log follower that read a run's end), as a child's exit does: run in a process of its own, since the pause
takes the process's signal wakeup fd and its SIGCHLD handler."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers.paths import REPO

#: The pause asked for: far longer than a wake-up takes, so a pause that ran out would show.
PAUSE_SECONDS = 120.0

PROGRAM = textwrap.dedent(f"""
    import threading, time
    from launcher.supervision.harness import _pause_until_a_signal, wake_supervisor
    pause = _pause_until_a_signal()
    woken = threading.Event()
    def wake():
        woken.wait()
        wake_supervisor()
    threading.Thread(target=wake, daemon=True).start()
    start = time.monotonic()
    woken.set()
    pause({PAUSE_SECONDS})
    print("woken" if time.monotonic() - start < {PAUSE_SECONDS} else "ran out")
""")


def test_a_wake_from_another_thread_ends_the_pause_between_rounds() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True,
                          timeout=PAUSE_SECONDS * 2)
    assert (done.returncode, done.stdout.strip()) == (0, "woken"), done.stderr


def test_a_wake_where_no_supervisor_pauses_is_a_no_op() -> None:
    done = subprocess.run([sys.executable, "-c", "from launcher.supervision.harness import wake_supervisor\n"
                           "wake_supervisor()\nprint('alive')"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "alive"), done.stderr
