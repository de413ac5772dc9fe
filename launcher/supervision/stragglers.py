"""Stragglers: the training tasks that keep the others waiting, named with their numbers. Pure.

Contract: every training task reports its own step-time breakdown
(``step_time`` events, ``StepBreakdown.of``: ``seconds_per_step``, the task's wall
time per step over the epoch; ``input_seconds_per_batch`` and
``compute_seconds_per_batch``, its input pipeline's and its own forward and
backward pass's time per batch from the entrypoint's probes; and
``peer_wait_seconds_per_step``, the rest of its step: waiting for its peers;
null where not measured). ``stragglers(reports)`` compares the tasks over
their last ``WINDOW`` reports, one measure at a time: the input side first,
then the compute (under MultiWorkerMirrored every task's wall time per step is
the slowest one's, so only its own parts tell who is slow: the straggler's
peers show the difference as peer wait), then the wall time per step. A task is a straggler when its mean is above
``RATIO`` x the median of the tasks' means (three tasks at least), by
``MIN_SECONDS`` at least and by ``STEP_SHARE`` of the median wall time per
step at least (when reported): what it holds the others up must be a part of
their step that matters, so timer noise on fast steps and a probe's jitter
on slow ones (an input probe's 6 ms against 1 ms, in 100 ms steps) name nobody.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from launcher.protocol import events

RATIO = 1.5
WINDOW = 3
MIN_TASKS = 3
MIN_SECONDS = 0.005
STEP_SHARE = 0.1
MEASURES = ("input_seconds_per_batch", "compute_seconds_per_batch", "seconds_per_step")


@dataclass(frozen=True)
class StepBreakdown:
    """One ``step_time`` report of a task: its step-time breakdown, in seconds (None: not measured)."""

    seconds_per_step: float | None = None
    input_seconds_per_batch: float | None = None
    compute_seconds_per_batch: float | None = None
    peer_wait_seconds_per_step: float | None = None

    @classmethod
    def of(cls, event: events.StepTime) -> StepBreakdown:
        return cls(event.seconds_per_step, event.input_seconds_per_batch, event.compute_seconds_per_batch,
                   event.peer_wait_seconds_per_step)

    def get(self, measure: str) -> float | None:
        value = getattr(self, measure)
        return None if value is None else float(value)


@dataclass
class Straggler:
    """A task slower than the others: its mean, the median of every task's mean, and their ratio."""

    task: str
    measure: str
    seconds: float
    median_seconds: float
    ratio: float


def stragglers(reports: Mapping[str, Sequence[StepBreakdown]]) -> list[Straggler]:
    """The stragglers among the tasks' last ``WINDOW`` reports (see the module contract); [] when none."""
    steps = _means(reports, "seconds_per_step")
    least = max(MIN_SECONDS, STEP_SHARE * statistics.median(steps.values())) if steps else MIN_SECONDS
    for measure in MEASURES:
        means = _means(reports, measure)
        if len(means) < MIN_TASKS:
            continue
        median = statistics.median(means.values())
        slow = [Straggler(task, measure, round(mean, 4), round(median, 4), round(mean / median, 2) if median else 0.0)
                for task, mean in means.items() if mean > RATIO * median and mean - median >= least]
        if slow:
            return slow
    return []


def _means(reports: Mapping[str, Sequence[StepBreakdown]], measure: str) -> dict[str, float]:
    """Each task's mean of ``measure`` over its last ``WINDOW`` reports (tasks that did not measure it left out)."""
    means = {}
    for task, times in reports.items():
        values = [v for v in (t.get(measure) for t in times[-WINDOW:]) if v is not None]
        if values:
            means[task] = statistics.fmean(values)
    return means
