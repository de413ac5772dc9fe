"""Writing a job's status where ``status`` reads it, without a failed write ending the supervision.

Contract: ``Publisher(write)`` is the one place a status is written (the supervisor's loop, and the harness's own
writes: a job failed before it ran, the status after a termination notice). ``publish(status)`` calls ``write``
and returns True, or, if it raised (a full disk, an API server refusing the ConfigMap), logs one line on stderr
(once for as long as the same error repeats) and returns False: the caller writes again later. ``publish_end(status,
attempts, pause)`` tries up to ``attempts`` times, ``pause`` seconds apart; False if none was written.
``publish_changed(status)`` publishes only a status that differs from the last one written, or whose goodput is
``GOODPUT_REFRESH_SECONDS`` stale (False: the write failed, or was not tried); after a failed write it tries no
other before the pause of its ``backoff.Backoff`` passed on ``clock`` (doubling while the writes keep failing:
an API server down or throttling is not asked at every poll round; the Kubernetes client honours the
``Retry-After`` of a 429 or 503 itself, urllib3's three tries), a success brings the normal pace back, and
``retry_now()`` ends the pause (the engine answered again: the status is written at the next round). ``log`` is
the supervisor's one line on stderr (its log file).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

from launcher.supervision.backoff import Backoff
from launcher.supervision.status import JobStatus
from launcher.supervision.tuning import POLL_SECONDS

#: A status is republished for its goodput alone after this many seconds.
GOODPUT_REFRESH_SECONDS = 5.0


class Publisher:
    """See the module contract."""

    def __init__(self, write: Callable[[JobStatus], None], clock: Callable[[], float] = time.monotonic,
                 backoff: Backoff | None = None):
        self.write = write
        self.clock = clock
        self.backoff = backoff or Backoff(POLL_SECONDS)  # the supervisor's: from its ``Tuning.poll_seconds``
        self._failing = ""  # why the last write failed (logged once), empty once one succeeded
        self._published: JobStatus | None = None  # the last status ``publish_changed`` wrote
        self._not_before: float | None = None  # when ``publish_changed`` may try again after a failed write

    def publish(self, status: JobStatus) -> bool:
        try:
            self.write(status)
        except Exception as exc:  # noqa: BLE001 - see the module contract: the caller writes it again
            if one_line(exc) != self._failing:
                self._failing = one_line(exc)
                log(f"cannot publish the status (it is tried again): {self._failing}")
            self._not_before = self.clock() + self.backoff.failed()
            return False
        self._failing = ""
        self._not_before = None
        self.backoff.ok()
        return True

    def publish_end(self, status: JobStatus, attempts: int, pause: float) -> bool:
        for attempt in range(1, attempts + 1):
            if self.publish(status):
                return True
            if attempt < attempts:
                time.sleep(pause)
        return False

    def publish_changed(self, status: JobStatus) -> bool:
        if self._not_before is not None and self.clock() < self._not_before:
            return False
        last = self._published
        stale = (last is None or last.goodput is None or status.goodput is None
                 or status.goodput.wall_seconds - last.goodput.wall_seconds >= GOODPUT_REFRESH_SECONDS)
        if last is None or replace(status, goodput=None) != replace(last, goodput=None) or stale:
            if not self.publish(status):
                return False
            self._published = status
        return True

    def retry_now(self) -> None:
        """The next ``publish_changed`` tries at once (the engine answered again)."""
        self._not_before = None


def log(message: str) -> None:
    """One line of the supervisor's on stderr (the supervisor process's log file)."""
    print(f"supervisor: {message}", file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its type, and its text with whitespace runs made one space."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
