"""Writing a job's status where ``status`` reads it, without a failed write ending the supervision.

Contract: ``Publisher(write)`` is the one place a status is written (the supervisor's loop, and the harness's own
writes: a job failed before it ran, the status after a termination notice). ``publish(status)`` calls ``write``
and returns True, or, if it raised (a full disk, an API server refusing the ConfigMap), logs one line on stderr
(once for as long as the same error repeats) and returns False: the caller writes again later. ``publish_end(status,
attempts, pause)`` tries up to ``attempts`` times, ``pause`` seconds apart; False if none was written.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from launcher.supervision.status import JobStatus


class Publisher:
    """See the module contract."""

    def __init__(self, write: Callable[[JobStatus], None]):
        self.write = write
        self._failing = ""  # why the last write failed (logged once), empty once one succeeded

    def publish(self, status: JobStatus) -> bool:
        try:
            self.write(status)
        except Exception as exc:  # noqa: BLE001 - see the module contract: the caller writes it again
            if one_line(exc) != self._failing:
                self._failing = one_line(exc)
                print(f"supervisor: cannot publish the status (it is tried again): {self._failing}",
                      file=sys.stderr, flush=True)
            return False
        self._failing = ""
        return True

    def publish_end(self, status: JobStatus, attempts: int, pause: float) -> bool:
        for attempt in range(1, attempts + 1):
            if self.publish(status):
                return True
            if attempt < attempts:
                time.sleep(pause)
        return False


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its type, and its text with whitespace runs made one space."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
