"""After success, the other tasks' time to exit by themselves (``linger_seconds``) before the rest are stopped.

Contract: ``linger(poll, publish, running, seconds, tuning, cancelled)`` calls ``poll()`` and ``publish()`` every
``tuning.poll_seconds`` until nothing is ``running()``, ``seconds`` passed or ``cancelled`` is set. The job
already succeeded: a runtime fault of a poll is logged, and the ``tuning.fault_retries``-th ends the linger (the
caller then stops the rest); a ``backoff.NotNow`` (nothing known of the runs now) is none; it never changes the
job's outcome.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from launcher.supervision.backoff import NotNow
from launcher.supervision.faults import FaultsInARow
from launcher.supervision.tuning import Tuning


def linger(poll: Callable[[], object], publish: Callable[[], object], running: Callable[[], bool], seconds: float,
           tuning: Tuning, cancelled: threading.Event) -> None:
    ends = time.monotonic() + seconds
    faults = FaultsInARow(tuning.fault_retries)
    while True:
        try:
            poll()
        except NotNow:
            pass  # nothing known now: the others keep their time to exit
        except Exception as exc:  # the job succeeded: a fault ends the linger (the caller stops the rest), not that
            if faults.failed(exc, " while the others linger"):
                return
        publish()
        left = ends - time.monotonic()
        if not running() or left <= 0 or cancelled.is_set():
            return
        cancelled.wait(min(tuning.poll_seconds, left))
