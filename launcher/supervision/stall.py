"""The stall watchdog's policy: typed observations of a job's progress in, an enum verdict out, pure.

Contract: a supervisor folds what it sees into a ``StallClock`` (``started``
when the training group (re)starts, ``alive`` when the lead says it built its
strategy or restored a backup, ``advanced`` on each progress report of the
lead, ``reports`` once the job is known to report steps; ``observe`` maps one
of the lead's events to the right one) and asks
``judge(clock, now, floor_seconds)`` each round. Times are seconds of one
clock (monotonic in the supervisor; on Kubernetes, the events' own times).

- ``BLIND``: nothing reports progress (a user's program without
  ``launcher.progress``): the watchdog cannot see steps and never fires.
- ``HEALTHY``: the job advanced within its timeout.
- ``STALLED``: it did not; the supervisor collects the stacks and acts
  (``Rules.decide_stall``).

The timeout is derived from what the job has shown, never below the floor
(spec ``stall.timeout_seconds``):

- before the first report of an attempt (startup, peers, restoring a backup,
  tracing the first step), counted from the lead's last sign of life:
  ``FIRST_STEP_FACTOR`` x the floor, or x the longest first step seen so far;
- afterwards: the largest of the floor, ``MEDIAN_FACTOR`` x the median
  interval between reports and ``MAX_FACTOR`` x the longest one seen
  (intervals over the last ``WINDOW`` reports; the one ending an attempt's first
  report is left out: it holds the tracing). A checkpoint save, an
  evaluation or an epoch's end lengthens the interval it falls in; once seen,
  ``MAX_FACTOR`` covers it, and the floor covers the first one;
- after the lead's ``finished`` (training done; its export and its exit report
  nothing), counted from then: the first-step allowance again.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from enum import Enum

from launcher.protocol.events import EventKind

FIRST_STEP_FACTOR = 3.0
MEDIAN_FACTOR = 10.0
MAX_FACTOR = 3.0
WINDOW = 50
#: The lead's events that show the job advancing.
WATCHED_EVENTS = frozenset({EventKind.STEP, EventKind.EPOCH, EventKind.CHECKPOINT})
#: The lead's events that start the count to its first step (it built its strategy, it restored a backup).
SIGNS_OF_LIFE = frozenset({EventKind.STARTED, EventKind.RESTORED})


class StallVerdict(str, Enum):
    BLIND = "blind"
    HEALTHY = "healthy"
    STALLED = "stalled"


@dataclass(frozen=True)
class StallClock:
    """What the watchdog knows of the job's progress (immutable; each method returns the next clock)."""

    #: Since when the job is silent: the attempt's start, or the lead's last sign of life or report.
    since: float
    #: When the lead last reported progress in this attempt; None: not yet.
    last_report: float | None = None
    #: Seconds between consecutive reports (the last ``WINDOW``), first report of each attempt left out.
    intervals: tuple[float, ...] = ()
    #: Seconds from an attempt's last sign of life to its first report (the first steps, tracing included).
    first_steps: tuple[float, ...] = ()
    #: True once the job is known to report progress (the built-in entrypoint: from its start).
    reporting: bool = False

    def started(self, now: float) -> StallClock:
        """The first-step allowance again, from ``now``: the training group (re)started (a new attempt), a
        warned stall is judged afresh, or the lead finished training (its export and exit report nothing)."""
        return replace(self, since=now, last_report=None)

    def alive(self, now: float) -> StallClock:
        """The lead built its strategy or restored a backup: its first step is counted from now."""
        return self if self.last_report is not None else replace(self, since=now)

    def advanced(self, now: float) -> StallClock:
        """The lead reported progress (a step, an epoch, a checkpoint)."""
        took = max(0.0, now - self.since)
        if self.last_report is None:
            return replace(self, since=now, last_report=now, first_steps=(*self.first_steps, took)[-WINDOW:],
                           reporting=True)
        return replace(self, since=now, last_report=now, intervals=(*self.intervals, took)[-WINDOW:], reporting=True)

    def reports(self) -> StallClock:
        """The job reports progress, though none came yet (the built-in entrypoint)."""
        return replace(self, reporting=True)


def observe(clock: StallClock, kind: EventKind, now: float) -> StallClock:
    """The clock after the lead's event of ``kind`` at ``now`` (events that say nothing of progress leave it)."""
    if kind in WATCHED_EVENTS:
        return clock.advanced(now)
    if kind in SIGNS_OF_LIFE:
        return clock.alive(now).reports()
    if kind is EventKind.FINISHED:  # its export and exit report nothing: the first-step allowance again
        return clock.started(now)
    return clock


@dataclass(frozen=True)
class Judgement:
    verdict: StallVerdict
    #: Seconds without progress allowed now, and seconds since the last progress (or the attempt's start).
    timeout_seconds: float
    silent_seconds: float


def timeout_seconds(clock: StallClock, floor_seconds: float) -> float:
    """How long the job may go without a report now (see the module contract)."""
    if clock.last_report is None:
        return FIRST_STEP_FACTOR * max((floor_seconds, *clock.first_steps))
    if not clock.intervals:
        return floor_seconds
    return max(floor_seconds, MEDIAN_FACTOR * statistics.median(clock.intervals), MAX_FACTOR * max(clock.intervals))


def judge(clock: StallClock, now: float, floor_seconds: float) -> Judgement:
    """The verdict on ``clock`` at ``now``."""
    silent = max(0.0, now - clock.since)
    timeout = timeout_seconds(clock, floor_seconds)
    if not clock.reporting:
        return Judgement(StallVerdict.BLIND, timeout, silent)
    return Judgement(StallVerdict.STALLED if silent > timeout else StallVerdict.HEALTHY, timeout, silent)
