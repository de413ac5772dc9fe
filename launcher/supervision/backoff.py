"""Pausing while an engine cannot be reached or throttles: the one home of the backoff policy.

Contract: ``Backoff(first, cap)`` paces the tries of one thing that keeps failing (a watch of the API, the
supervisor's poll rounds, its status writes): after the n-th failure in a row ``failed(retry_after)`` gives the
pause before the next try, ``first`` doubled per failure up to ``cap``, between half and all of it (jitter: many
supervisors do not come back at once), never less than what the engine asked (``Retry-After``) but never more
than ``cap``; ``ok()`` after a success starts again from ``first`` (the normal pace). ``NotNow`` is what a
``Runtime``'s ``poll`` raises while its engine cannot be reached now (restarting, throttling, a broken
connection) and so nothing is known of the run: the supervisor decides nothing, counts no fault and backs its
rounds off (the runtime itself says when that has gone on too long: a fault). Pure but for ``jitter``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

#: The longest pause between two tries, whatever the failures or the engine's ``Retry-After``. No liveness rule
#: reads the time of a status write (a supervisor is alive while its process or pod runs: ``harness.lost``,
#: ``kubernetes.status.supervisor_state``), so this bounds only how late a status is written, or a round made,
#: once the engine answers again.
CAP_SECONDS = 30.0


class NotNow(Exception):
    """The engine cannot be reached now, or throttles (``retry_after``: the seconds it asked to wait, if it did)."""

    def __init__(self, why: str, retry_after: float | None = None):
        super().__init__(why)
        self.retry_after = retry_after


def pause(failures: int, first: float, cap: float, retry_after: float | None = None,
          jitter: Callable[[], float] = random.random) -> float:
    """The pause before the next try after ``failures`` in a row (see the module contract)."""
    full = min(cap, first * 2 ** max(0, failures - 1))
    return min(cap, max(full * (0.5 + jitter() / 2), retry_after or 0.0))


@dataclass
class Backoff:
    """The failures in a row of one thing tried again, and the pause they call for (see the module contract)."""

    first: float
    cap: float = CAP_SECONDS
    jitter: Callable[[], float] = random.random
    failures: int = 0

    def failed(self, retry_after: float | None = None) -> float:
        self.failures += 1
        return pause(self.failures, self.first, self.cap, retry_after, self.jitter)

    def ok(self) -> None:
        self.failures = 0
