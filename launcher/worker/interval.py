"""``backup_every_steps: auto``: the backup interval from what a backup and a step cost on this cluster.

Contract: ``steps_between(save_seconds, step_seconds)`` is the fewest steps
between backups for which the time backups hold training up is at most
``SHARE`` of the training time (``save_seconds / (n * step_seconds) <=
SHARE``), between 1 and ``MAX_STEPS``. ``AutoInterval(strategy)`` keeps one
task's measures: ``steps`` is the interval now (``initial`` until decided:
the entrypoint starts at ``INITIAL_STEPS`` or an epoch, whichever is
shorter, so the first epoch measures a backup); ``saved(seconds)`` records how long a backup held the step up
(with asynchronous backups, the copy to host memory; the first two, which
set the writer up and trace its copy, are left out once others exist); ``decide(step_seconds)``,
called by every training task at the same point (an epoch's end), proposes an
interval from this task's median save and the epoch's time per step, and
every task takes the largest proposal (``agree``: one all-gather under
MultiWorkerMirrored, so every task keeps saving at the same steps). It
returns the interval (unchanged while no backup was measured) as the
``backup_interval`` event the lead reports (``status`` shows it). ``timed(save)``
runs a backup and records its hold-up.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import tensorflow as tf

from launcher.protocol import events

#: The share of training time backups may hold training up.
SHARE = 0.02
#: The interval before the first decision (the spec's default).
INITIAL_STEPS = 100
MAX_STEPS = 100_000


def steps_between(save_seconds: float, step_seconds: float, share: float = SHARE) -> int:
    if step_seconds <= 0:
        return MAX_STEPS
    return max(1, min(MAX_STEPS, math.ceil(save_seconds / (share * step_seconds))))


def agree(strategy: tf.distribute.Strategy, steps: int) -> int:
    """The largest of every training task's ``steps`` (a collective: every task calls it at the same point)."""
    proposals = strategy.run(lambda: tf.constant([steps], dtype=tf.int64))
    return int(tf.reduce_max(strategy.gather(proposals, axis=0)).numpy())


class AutoInterval:
    """One task's measures of its backups and steps, and the interval the tasks agreed on."""

    def __init__(self, strategy: tf.distribute.Strategy, initial: int = INITIAL_STEPS):
        self.strategy = strategy
        self.steps = initial
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

    def decide(self, step_seconds: float | None) -> events.BackupInterval:
        """The interval from now on, agreed by every training task; as the event the lead reports."""
        save = self.save_seconds()
        proposal = steps_between(save, step_seconds) if save is not None and step_seconds else 0
        agreed = agree(self.strategy, proposal)
        if agreed > 0:
            self.steps = agreed
        return events.BackupInterval(steps=self.steps, save_seconds=None if save is None else round(save, 6),
                                     step_seconds=None if step_seconds is None else round(step_seconds, 6))
