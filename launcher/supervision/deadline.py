"""The job's deadline (``restart.deadline_seconds``): wall time since the job first started, adoptions included.

Contract: ``Deadline(seconds, started_at)`` is set when supervision begins: ``started_at`` is the job's start
(unix seconds; an adopted job's first start, so a new supervisor does not grant it the time again), measured
from then on the monotonic clock. ``passed()`` is True once ``seconds`` went by (never for None); ``left()`` is the
seconds until then (infinite for None, never below 0); ``message`` is the job's failure then.
"""

from __future__ import annotations

import math
import time


class Deadline:
    """See the module contract."""

    def __init__(self, seconds: float | None, started_at: float):
        self.seconds = seconds
        self._ends = None if seconds is None else time.monotonic() + seconds - (time.time() - started_at)

    def passed(self) -> bool:
        return self._ends is not None and time.monotonic() >= self._ends

    def left(self) -> float:
        return math.inf if self._ends is None else max(0.0, self._ends - time.monotonic())

    @property
    def message(self) -> str:
        return f"failed: deadline of {self.seconds} s exceeded"
