"""``backup_every_steps: auto``: the backup interval that loses the least training time to backups and failures.

Contract: ``choose(save_seconds, step_seconds, failures, observed_seconds, stated_mtbf)`` is the one
home of the rule (pure): Young-Daly's ``sqrt(2 x save x MTBF)`` seconds in whole steps when an MTBF
is known, else the fewest steps keeping backups under ``SHARE`` of the time; between 1 and
``MAX_STEPS``, with a ``Choice.reason``. ``AutoInterval`` keeps one task's measures (``saved``,
``timed``, ``starts``) and ``decide`` proposes an interval at an epoch's end; all tasks take the
largest proposal (``agree``) so they save at the same steps. Users' guide:
docs/faults.md (Backups).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.protocol import events
from launcher.protocol.durations import for_people

if TYPE_CHECKING:
    import tensorflow as tf

#: The share of training time backups may hold training up, when nothing tells how often the job fails.
SHARE = 0.02
#: The interval before the first decision (the spec's default).
INITIAL_STEPS = 100
MAX_STEPS = 100_000


def steps_between(save_seconds: float, step_seconds: float, share: float = SHARE) -> int:
    """The fewest steps between backups that keep ``save_seconds / (n x step_seconds) <= share``, in [1, MAX_STEPS]."""
    if step_seconds <= 0:
        return MAX_STEPS
    return max(1, min(MAX_STEPS, math.ceil(save_seconds / (share * step_seconds))))


def young_daly_steps(save_seconds: float, step_seconds: float, mtbf_seconds: float) -> int:
    """Steps in ``sqrt(2 x save_seconds x mtbf_seconds)`` seconds of training (rounded), in [1, MAX_STEPS]."""
    if step_seconds <= 0:
        return MAX_STEPS
    return max(1, min(MAX_STEPS, round(math.sqrt(2 * save_seconds * mtbf_seconds) / step_seconds)))


@dataclass(frozen=True)
class Choice:
    """An interval and why: ``mtbf_seconds`` the MTBF it assumed (None: the share rule decided)."""

    steps: int
    reason: str
    mtbf_seconds: float | None = None


def choose(save_seconds: float, step_seconds: float, failures: int, observed_seconds: float,
           stated_mtbf: float | None) -> Choice:
    """The interval that maximises goodput, from the save's and a step's cost and what the run knows of failures.

    ``failures``: restarts of the run so far, in ``observed_seconds`` since its first start. Observed
    failures decide when there are any; else ``stated_mtbf`` (seconds); else the ``SHARE`` rule.
    """
    save = f"save {for_people(save_seconds)}"
    if failures > 0 and observed_seconds > 0:
        mtbf = observed_seconds / failures
        why = f"{failures} failure{'s' if failures > 1 else ''} in {for_people(observed_seconds)}"
        return Choice(young_daly_steps(save_seconds, step_seconds, mtbf),
                      f"{save}, MTBF {for_people(mtbf)} ({why})", mtbf)
    if stated_mtbf is not None:
        return Choice(young_daly_steps(save_seconds, step_seconds, stated_mtbf),
                      f"{save}, MTBF {for_people(stated_mtbf)} (stated)", stated_mtbf)
    return Choice(steps_between(save_seconds, step_seconds),
                  f"{save}, no failure yet and no restart.expected_mtbf: backups hold training up at most "
                  f"{SHARE:.0%}")


def agree(strategy: tf.distribute.Strategy, steps: int) -> int:
    """The largest of every training task's ``steps`` (a collective: every task calls it at the same point)."""
    import tensorflow as tf

    proposals = strategy.run(lambda: tf.constant([steps], dtype=tf.int64))
    return int(tf.reduce_max(strategy.gather(proposals, axis=0)).numpy())


class AutoInterval:
    """One task's measures of its backups and steps, and the interval the tasks agreed on."""

    def __init__(self, strategy: tf.distribute.Strategy, initial: int = INITIAL_STEPS,
                 stated_mtbf: float | None = None, starts: Callable[[], Sequence[float]] = tuple):
        self.strategy = strategy
        self.steps = initial
        self.stated_mtbf = stated_mtbf
        self.starts = starts
        self.saves: list[float] = []

    def saved(self, seconds: float) -> None:
        self.saves.append(seconds)

    def timed(self, save: Callable[[], object]) -> None:
        """Runs one backup ``save`` and records how long it held the step up."""
        start = time.perf_counter()
        save()
        self.saved(time.perf_counter() - start)

    def save_seconds(self) -> float | None:
        measured = self.saves[2:] or self.saves[1:] or self.saves
        return statistics.median(measured) if measured else None

    def decide(self, step_seconds: float | None, now: float) -> events.BackupInterval:
        """The interval from now on (``now``: unix seconds), agreed by every training task; as the event the lead reports."""
        save = self.save_seconds()
        choice = None
        if save is not None and step_seconds:
            starts = self.starts()
            observed = now - starts[0] if starts else 0.0
            choice = choose(save, step_seconds, max(0, len(starts) - 1), observed, self.stated_mtbf)
        agreed = agree(self.strategy, choice.steps if choice else 0)
        if agreed > 0:
            self.steps = agreed
        return events.BackupInterval(
            steps=self.steps, save_seconds=None if save is None else round(save, 6),
            step_seconds=None if step_seconds is None else round(step_seconds, 6),
            mtbf_seconds=None if choice is None or choice.mtbf_seconds is None else round(choice.mtbf_seconds, 3),
            reason=choice.reason if choice else "no backup measured yet")
