"""Goodput: where every second of a run went, from its tasks' events and the supervisor's own record.

Contract: a ``Ledger`` is folded in time order: ``Ledger.launched(at)``, ``ledger.event(event,
from_lead)`` per task event and ``ledger.disrupted(kind, at)`` per restart or stall verdict;
``ledger.goodput(now)`` is the ``Goodput`` so far. Pure: no I/O, no clock (unix seconds passed in).
Every second between launch and ``now`` goes to exactly one part (start-up, restarts, recomputation,
backups, input_wait, stalls, evaluation, slow steps, finishing, productive), so they add up to ``wall_seconds``.
Productive time is the steps trained once priced at the steady pace (the median seconds per step of the last
``PACE_WINDOW`` steady intervals); what steps took beyond it is the backups, the evaluation or slow steps, and steps
done again are priced at that pace too. How each part is measured: docs/report.md.
"""

from __future__ import annotations

import statistics
from enum import Enum

from pydantic import BaseModel, ConfigDict

from launcher.protocol import events
from launcher.protocol.durations import for_people

#: Output is rounded to this many decimals (seconds, fraction).
DECIMALS = 3
#: The steady pace is the median of this many of the last intervals between step reports without a boundary.
PACE_WINDOW = 21


class LostSeconds(BaseModel):
    """Seconds lost, by cause (see the module contract)."""

    model_config = ConfigDict(frozen=True)

    start_up: float = 0.0
    restarts: float = 0.0
    recomputation: float = 0.0
    backups: float = 0.0
    input_wait: float = 0.0
    stalls: float = 0.0
    evaluation: float = 0.0
    #: What steps took beyond the steady pace and beyond any backup or evaluation they held: a new process's first
    #: steps, a busy host. A later interval faster than the pace gives back what earlier ones lost here.
    slow_steps: float = 0.0
    #: The lead's last step until the job's end, once the lead reported ``finished``: the final save and export.
    finishing: float = 0.0

    def plus(self, **seconds: float) -> LostSeconds:
        """These losses with ``seconds`` added to the parts named."""
        return self.model_copy(update={name: getattr(self, name) + value for name, value in seconds.items()})

    def total(self) -> float:
        return sum(self.model_dump().values())

    def biggest(self) -> tuple[str, float]:
        """The biggest part, by name and seconds."""
        return max(self.model_dump().items(), key=lambda item: item[1])


class Goodput(BaseModel):
    """A run's goodput: the ``goodput`` of ``status -o json`` (an interface: keep the names)."""

    model_config = ConfigDict(frozen=True)

    wall_seconds: float
    productive_seconds: float
    fraction: float
    lost_seconds: LostSeconds
    recomputed_steps: int = 0

    def line(self) -> str:
        """One short line for people: the fraction and the biggest loss."""
        name, seconds = self.lost_seconds.biggest()
        biggest = f"; most lost to {name.replace('_', ' ')}: {for_people(seconds)}" if seconds > 0 else ""
        return f"goodput {self.fraction:.0%} of {for_people(self.wall_seconds)}{biggest}"


class Disruption(str, Enum):
    """What the supervisor saw end a stretch of training."""

    FAILURE = "failure"
    PREEMPTION = "preemption"
    STALL = "stall"


class Phase(str, Enum):
    STARTING = "starting"  # launched, no step yet
    TRAINING = "training"
    RECOVERING = "recovering"  # disrupted, no step since
    FINISHING = "finishing"  # the lead reported ``finished``


class Ledger(BaseModel):
    """The running account of a run (see the module contract); build one with ``Ledger.launched``."""

    model_config = ConfigDict(frozen=True)

    launched_at: float
    #: Every second up to ``cursor`` went to a part already.
    cursor: float
    phase: Phase = Phase.STARTING
    lost: LostSeconds = LostSeconds()
    #: The lead task's last reported step in its current run, and the highest step any run reached.
    step: int | None = None
    reached: int = 0
    #: Steps up to this one, after a restore, are done again.
    redo_until: int = 0
    recomputed_steps: int = 0
    #: Seconds per step of the last ``PACE_WINDOW`` intervals without a boundary; the lead's own measure before any.
    paces: tuple[float, ...] = ()
    measured_step_seconds: float | None = None
    backup_every_steps: int | None = None
    save_seconds: float | None = None
    input_wait_fraction: float | None = None
    #: Productive seconds since the last epoch's end (its input wait comes with that epoch's measure).
    pending: float = 0.0
    #: Since the last step: an epoch ended, with validation metrics.
    epoch_ended: bool = False
    validated: bool = False

    @classmethod
    def launched(cls, at: float, backup_every_steps: int | None = None) -> Ledger:
        """A run launched at ``at`` whose backups come every ``backup_every_steps`` (None: per epoch)."""
        return cls(launched_at=at, cursor=at, backup_every_steps=backup_every_steps)

    @classmethod
    def resumed(cls, goodput: Goodput, launched_at: float, step: int | None,
                backup_every_steps: int | None = None) -> Ledger:
        """The account carried on from a run's last ``goodput`` (another supervisor's, which died), whose lead
        had reported ``step`` (None: none yet); from then on, as if its parts had been folded here."""
        return cls(launched_at=launched_at, cursor=launched_at + goodput.wall_seconds, lost=goodput.lost_seconds,
                   phase=Phase.STARTING if step is None else Phase.TRAINING, step=step, reached=step or 0,
                   recomputed_steps=goodput.recomputed_steps, backup_every_steps=backup_every_steps)

    @property
    def step_seconds(self) -> float | None:
        """The steady pace: the median of ``paces``, else the lead's own measure."""
        return statistics.median(self.paces) if self.paces else self.measured_step_seconds

    def event(self, event: events.Event, from_lead: bool) -> Ledger:
        """The account after one more task event (``from_lead``: the job's lead task wrote it)."""
        if not from_lead:
            return self
        if isinstance(event, events.Step):
            return self._step(event.step, event.time)
        if isinstance(event, events.Restored):
            return self._restored(event.step, event.time)
        if isinstance(event, events.EpochEnd):
            update: dict[str, object] = {"epoch_ended": True,
                                         "validated": any(name.startswith("val_") for name in event.metrics)}
            if event.input_wait_fraction is not None:
                fraction = min(1.0, max(0.0, event.input_wait_fraction))
                update.update(input_wait_fraction=fraction, pending=0.0,
                              lost=self.lost.plus(input_wait=self.pending * fraction))
            return self.model_copy(update=update)
        if isinstance(event, events.StepTime) and event.seconds_per_step:
            return self.model_copy(update={"measured_step_seconds": event.seconds_per_step})
        if isinstance(event, events.BackupInterval):
            return self.model_copy(update={"backup_every_steps": event.steps, "save_seconds": event.save_seconds})
        if isinstance(event, events.Failed):
            return self.disrupted(Disruption.FAILURE, event.time)
        if isinstance(event, events.Preempted):
            return self.disrupted(Disruption.PREEMPTION, event.time)
        if isinstance(event, events.Finished) and self.phase is Phase.TRAINING:
            at = max(event.time, self.cursor)
            return self.model_copy(update={"lost": self.lost.plus(finishing=at - self.cursor), "cursor": at,
                                           "phase": Phase.FINISHING})
        return self

    def disrupted(self, kind: Disruption, at: float) -> Ledger:
        """The account after the supervisor saw ``kind`` at ``at``; training is recovering until its next step.

        Once recovering, a further disruption changes nothing (a task's ``failed`` event, then the restart); nor
        does one once the lead finished (the time until the end is finishing).
        """
        if self.phase in (Phase.RECOVERING, Phase.FINISHING):
            return self
        at = max(at, self.cursor)
        gap = at - self.cursor
        if self.phase is Phase.STARTING:
            lost = self.lost.plus(start_up=gap)
        elif kind is Disruption.FAILURE:
            lost = self.lost.plus(recomputation=gap)
        elif kind is Disruption.STALL:
            lost = self.lost.plus(stalls=gap)
        else:
            lost = self.lost.plus(restarts=gap)
        return self.model_copy(update={"lost": lost, "cursor": at, "phase": Phase.RECOVERING})

    def stalled(self, at: float) -> Ledger:
        """A stall verdict at ``at`` the job goes on from (a warning, no restart): since the last step, stalls."""
        if self.phase is not Phase.TRAINING:
            return self
        at = max(at, self.cursor)
        return self.model_copy(update={"lost": self.lost.plus(stalls=at - self.cursor), "cursor": at})

    def _restored(self, step: int, at: float) -> Ledger:
        ledger = self.disrupted(Disruption.FAILURE, at) if self.phase is Phase.TRAINING else self
        return ledger.model_copy(update={"step": step, "redo_until": ledger.reached})

    def _step(self, step: int, at: float) -> Ledger:
        if self.phase is Phase.RECOVERING and at <= self.cursor:
            # a step of the disrupted run, read after the disruption: how far it got, not a recovery
            return self.model_copy(update={"reached": max(self.reached, step)})
        at = max(at, self.cursor)
        gap = at - self.cursor
        common: dict[str, object] = {"cursor": at, "step": step, "reached": max(self.reached, step),
                                     "phase": Phase.TRAINING, "epoch_ended": False, "validated": False}
        previous = self.step
        if self.phase is Phase.STARTING:
            return self.model_copy(update={**common, "lost": self.lost.plus(start_up=gap)})
        if self.phase is Phase.RECOVERING:
            again = max(0, min(step, self.redo_until) - previous) if previous is not None else 0
            redo = min(gap, again * (self.step_seconds or 0.0))
            return self.model_copy(update={**common, "lost": self.lost.plus(recomputation=redo, restarts=gap - redo),
                                           "recomputed_steps": self.recomputed_steps + again})
        if previous is None or step <= previous:  # a run restarted unseen: from its last step, a restart
            return self.model_copy(update={**common, "lost": self.lost.plus(restarts=gap)})
        steps = step - previous
        again = max(0, min(step, self.redo_until) - previous)
        fresh = steps - again
        every = self.backup_every_steps
        saves = step // every - previous // every if every else int(self.epoch_ended)
        pace = self.step_seconds
        redo = min(gap, again * pace) if pace else gap * again / steps
        rest = gap - redo
        over = rest - fresh * pace if pace else 0.0  # beyond the steady pace (below it: negative)
        backups = evaluation = 0.0
        if over > 0 and saves:
            backups = min(over, saves * self.save_seconds) if self.save_seconds else over
        if over > 0 and self.validated:
            evaluation = over - backups
        slow = max(over - backups - evaluation, -self.lost.slow_steps)
        productive = rest - backups - evaluation - slow
        update = {**common, "lost": self.lost.plus(recomputation=redo, backups=backups, evaluation=evaluation,
                                                   slow_steps=slow),
                  "recomputed_steps": self.recomputed_steps + again, "pending": self.pending + productive}
        if not saves and not again and not self.epoch_ended:
            update["paces"] = (*self.paces, gap / steps)[-PACE_WINDOW:]
        return self.model_copy(update=update)

    def goodput(self, now: float) -> Goodput:
        """The run's goodput from its launch until ``now`` (after the last event: the time since it goes to the
        phase the run is in; training's to productive, finishing's to finishing)."""
        end = max(now, self.cursor)
        tail = end - self.cursor
        lost, pending = self.lost, self.pending
        if self.phase is Phase.STARTING:
            lost = lost.plus(start_up=tail)
        elif self.phase is Phase.RECOVERING:
            lost = lost.plus(restarts=tail)
        elif self.phase is Phase.FINISHING:
            lost = lost.plus(finishing=tail)
        else:
            pending += tail
        lost = lost.plus(input_wait=pending * (self.input_wait_fraction or 0.0))
        wall = end - self.launched_at
        productive = max(0.0, wall - lost.total())
        return Goodput(wall_seconds=round(wall, DECIMALS), productive_seconds=round(productive, DECIMALS),
                       fraction=round(productive / wall, DECIMALS) if wall > 0 else 0.0,
                       lost_seconds=LostSeconds(**{name: round(value, DECIMALS)
                                                   for name, value in lost.model_dump().items()}),
                       recomputed_steps=self.recomputed_steps)

