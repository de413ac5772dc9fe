"""The stall watchdog's policy: typed observations of a job's progress in, an enum verdict out, pure.

Contract: a supervisor folds what it sees into a ``StallClock`` (``started``, ``alive``, ``advanced``,
``reports``, ``looked``; ``after_event`` maps one lead event) and asks ``judge(clock, now,
floor_seconds)`` each round: ``BLIND`` (no progress reported: never fires), ``HEALTHY``, or
``SUSPECTED`` (silent past ``look_seconds``: read stacks, then ``conclude`` gives ``STALLED`` on
unchanged stacks, never while they move, or on time alone past ``timeout_seconds`` when the stacks
tell nothing). After the lead's ``finished`` the clock says ``finished``: a stall then is never
restarted (``Rules.decide`` of a ``Stalled``). Both limits derive from the job's own
pace over their floors. Times are seconds of one clock passed in. How the limits are derived:
docs/faults.md (Stalls).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from enum import Enum

from launcher.protocol.events import EventKind
from launcher.supervision.stack_evidence import StackReading, StackVerdict

FIRST_STEP_FACTOR = 3.0
MEDIAN_FACTOR = 10.0
MAX_FACTOR = 3.0
WINDOW = 50
#: Seconds of silence (for a job whose pace asks for no more) after which the stacks are read: at most the floor.
LOOK_SECONDS = 30.0
#: The lead's events that show the job advancing.
WATCHED_EVENTS = frozenset({EventKind.STEP, EventKind.EPOCH, EventKind.CHECKPOINT})
#: The lead's events that start the count to its first step (it built its strategy, it restored a backup).
SIGNS_OF_LIFE = frozenset({EventKind.STARTED, EventKind.RESTORED})


class StallVerdict(str, Enum):
    BLIND = "blind"
    HEALTHY = "healthy"
    SUSPECTED = "suspected"
    STALLED = "stalled"


class StallEvidence(str, Enum):
    """What decided a judgement after a suspected stall (``status``: ``stall.evidence``)."""

    TIME_ONLY = "time_only"  # no stacks could be read, or they told nothing: the silence passed the timeout, or not
    STACKS_UNCHANGED = "stacks_unchanged"  # a task held the others in the same frames: a stall
    STACKS_MOVED = "stacks_moved"  # a training task's stacks moved: working, not a stall


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
    #: When the stacks were last read in this silence; None: not yet.
    looked_at: float | None = None
    #: The lead reported ``finished`` in this attempt: training is done, only its export and exit remain.
    finished: bool = False

    def started(self, now: float) -> StallClock:
        """The training group (re)started at ``now``: a new attempt, with the first-step allowance."""
        return replace(self.again(now), finished=False)

    def again(self, now: float) -> StallClock:
        """The first-step allowance again, from ``now``, in the same attempt: a warned stall is judged afresh, or
        the lead finished training (its export and exit report nothing)."""
        return replace(self, since=now, last_report=None, looked_at=None)

    def alive(self, now: float) -> StallClock:
        """The lead built its strategy or restored a backup: its first step is counted from now."""
        return self if self.last_report is not None else replace(self, since=now, looked_at=None)

    def advanced(self, now: float) -> StallClock:
        """The lead reported progress (a step, an epoch, a checkpoint)."""
        took = max(0.0, now - self.since)
        if self.last_report is None:
            return replace(self, since=now, last_report=now, first_steps=(*self.first_steps, took)[-WINDOW:],
                           reporting=True, looked_at=None)
        return replace(self, since=now, last_report=now, intervals=(*self.intervals, took)[-WINDOW:], reporting=True,
                       looked_at=None)

    def reports(self) -> StallClock:
        """The job reports progress, though none came yet (the built-in entrypoint)."""
        return replace(self, reporting=True)

    def looked(self, now: float) -> StallClock:
        """The stacks were read at ``now`` and showed no stall: read them again later (see ``judge``)."""
        return replace(self, looked_at=now)


def after_event(clock: StallClock, kind: EventKind, now: float) -> StallClock:
    """The clock after the lead's event of ``kind`` at ``now`` (events that say nothing of progress leave it)."""
    if kind in WATCHED_EVENTS:
        return clock.advanced(now)
    if kind in SIGNS_OF_LIFE:
        return clock.alive(now).reports()
    if kind is EventKind.FINISHED:  # its export and exit report nothing: the first-step allowance again
        return replace(clock.again(now), finished=True)
    return clock


@dataclass(frozen=True)
class Judgement:
    verdict: StallVerdict
    #: Seconds without progress allowed on time alone; after which the stacks are read; since the last progress.
    timeout_seconds: float
    look_seconds: float
    silent_seconds: float


def timeout_seconds(clock: StallClock, floor_seconds: float) -> float:
    """How long the job may go without a report on time alone: what its own pace allows now, at least
    ``floor_seconds`` (see the module contract)."""
    if clock.last_report is None:
        return FIRST_STEP_FACTOR * max((floor_seconds, *clock.first_steps))
    if not clock.intervals:
        return floor_seconds
    return max(floor_seconds, MEDIAN_FACTOR * statistics.median(clock.intervals), MAX_FACTOR * max(clock.intervals))


def look_seconds(clock: StallClock, floor_seconds: float) -> float:
    """After how long without a report the stacks are read (see the module contract)."""
    return timeout_seconds(clock, min(floor_seconds, LOOK_SECONDS))


def judge(clock: StallClock, now: float, floor_seconds: float) -> Judgement:
    """The verdict on ``clock`` at ``now``: ``BLIND``, ``HEALTHY`` or ``SUSPECTED`` (read the stacks)."""
    silent = max(0.0, now - clock.since)
    timeout, look = timeout_seconds(clock, floor_seconds), look_seconds(clock, floor_seconds)
    if not clock.reporting:
        return Judgement(StallVerdict.BLIND, timeout, look, silent)
    if silent <= look:
        due = False
    elif clock.looked_at is None or now - clock.looked_at > look:
        due = True
    else:  # looked recently; again once the silence passed the timeout since then
        due = clock.looked_at - clock.since <= timeout < silent
    return Judgement(StallVerdict.SUSPECTED if due else StallVerdict.HEALTHY, timeout, look, silent)


@dataclass(frozen=True)
class Finding:
    """What a suspected stall turned out to be, and the evidence that decided it."""

    verdict: StallVerdict  # STALLED or HEALTHY
    evidence: StallEvidence


def conclude(judgement: Judgement, reading: StackReading) -> Finding:
    """A ``SUSPECTED`` judgement decided by its stacks (see the module contract)."""
    if reading.verdict is StackVerdict.MOVED:
        return Finding(StallVerdict.HEALTHY, StallEvidence.STACKS_MOVED)
    if reading.verdict is StackVerdict.STUCK:
        return Finding(StallVerdict.STALLED, StallEvidence.STACKS_UNCHANGED)
    late = judgement.silent_seconds > judgement.timeout_seconds
    return Finding(StallVerdict.STALLED if late else StallVerdict.HEALTHY, StallEvidence.TIME_ONLY)


def describe(judgement: Judgement, reading: StackReading, finding: Finding, gap_seconds: float,
             directory: str | None = None) -> str:
    """The one line a judgement after a suspicion is told by (every supervisor, and the Kubernetes watch)."""
    silent = f"no progress for {judgement.silent_seconds:.0f} s"
    if finding.evidence is StallEvidence.STACKS_MOVED:
        return f"{silent}: stacks moved, not a stall ({reading.why})"
    if finding.evidence is StallEvidence.STACKS_UNCHANGED:
        head = (f"{silent} (stacks read after {judgement.look_seconds:.0f} s); stacks unchanged "
                f"{gap_seconds:.0f} s apart")
    else:
        head = f"{silent} (stall timeout {judgement.timeout_seconds:.0f} s); time only ({reading.why})"
    if finding.verdict is not StallVerdict.STALLED:
        return head
    return (f"{head}; suspected: {', '.join(reading.suspects) or 'none'}"
            + (f" ({reading.why})" if finding.evidence is StallEvidence.STACKS_UNCHANGED else "")
            + (f"; stacks in {directory}" if directory else ""))
