"""What ``report`` draws, folded from a run's history (pure: a ``RunHistory`` in, a ``Timeline`` out).

Contract: one ``Lane`` per task of the plan, in the plan's order. A task's output is split into runs at each
``started`` event (with the ``PRELUDE`` it announced just before); a run's first part is a span: ``start_up`` for the
first run, ``restart`` for a later one (from the previous run's last event): as many as the task's restarts and
preemptions in ``status``, the same account goodput keeps; until its first step (the lead task, which reports steps) or its
``started`` (the others); then ``training`` until its last event (``evaluation`` for the evaluator).
Marks: ``backup`` (a checkpoint saved), ``failure`` (a ``failed`` event, or the exit code ``status`` gives
a failed task whose run reported none), ``restart`` (a ``restored`` event: where training resumed),
``preemption``, ``evaluation``. A stall has no time in the records: ``stalls`` counts them (``status``).
``step_rate``: steps per second between the lead's consecutive step reports of one run, at the midpoint;
``loss``: the lead's reported losses by step (the epochs' when no step carried one). Times are unix seconds.
``status``: the run's status document, typed (``ReportStatus.of``: a malformed one is a ``LaunchError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from launcher.cli.report.status import ReportStatus, TaskRecord
from launcher.protocol import events
from launcher.supervision.history import RunHistory
from launcher.supervision.status import State


class Kind(str, Enum):
    START_UP = "start_up"
    TRAINING = "training"
    BACKUP = "backup"
    FAILURE = "failure"
    RESTART = "restart"
    STALL = "stall"
    PREEMPTION = "preemption"
    EVALUATION = "evaluation"


@dataclass(frozen=True)
class Span:
    kind: Kind
    start: float
    end: float
    label: str


@dataclass(frozen=True)
class Mark:
    kind: Kind
    time: float
    label: str


@dataclass
class Lane:
    task: str
    role: str
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)


@dataclass
class Timeline:
    start: float
    end: float
    lanes: list[Lane]
    #: (time, steps per second).
    step_rate: list[tuple[float, float]]
    #: (step, loss).
    loss: list[tuple[int, float]]
    status: ReportStatus
    stalls: int = 0


def timeline(history: RunHistory) -> Timeline:
    status = ReportStatus.of(history.plan.name, history.status)
    times = [e.time for found in history.events.values() for e in found]
    start = min([*times, *([status.started_at] if status.started_at is not None else [])], default=0.0)
    end = max(times, default=start)
    lead = history.plan.lead().name
    exits = {t.name: t for t in status.tasks}
    lanes = [_lane(task.name, task.type.value, history.events.get(task.name, []), start, task.name == lead, exits.get(task.name))
             for task in history.plan.tasks]
    lead_events = history.events.get(lead, [])
    return Timeline(start=start, end=max(end, start), lanes=lanes, step_rate=_step_rate(lead_events), loss=_loss(lead_events),
                    status=status, stalls=status.stall.stalls if status.stall else 0)


#: What a run announces before its ``started`` (the entrypoint's stack handler, a standby's warm start): part of the
#: run it precedes.
PRELUDE = (events.StacksOnSignal, events.WarmStart)


def _runs(found: list[events.Event]) -> list[list[events.Event]]:
    """The task's events split into runs: a run begins with its ``started`` and the prelude events right before it
    (what came before the first run's is a run of its own)."""
    runs: list[list[events.Event]] = []
    for event in found:
        if isinstance(event, events.Started) and runs:
            current = runs[-1]
            begins = len(current)
            while begins and isinstance(current[begins - 1], PRELUDE):
                begins -= 1
            if begins:
                runs.append(current[begins:])
                del current[begins:]
        elif not runs:
            runs.append([])
        runs[-1].append(event)
    return runs


def _lane(task: str, role: str, found: list[events.Event], start: float, lead: bool, status: TaskRecord | None) -> Lane:
    lane = Lane(task=task, role=role)
    begin = start
    work = Kind.EVALUATION if role == "evaluator" else Kind.TRAINING
    runs = _runs(found)
    for number, run in enumerate(runs):
        first = Kind.START_UP if number == 0 else Kind.RESTART
        working = next((e.time for e in run if isinstance(e, events.Step)), None) if lead else None
        if working is None:
            working = next((e.time for e in run if isinstance(e, events.Started)), run[0].time)
        lane.spans.append(Span(first, begin, working, "start-up" if number == 0 else f"restart {number}"))
        last = run[-1].time
        if last > working:
            lane.spans.append(Span(work, working, last, work.value))
        lane.marks.extend(mark for mark in map(_mark, run) if mark is not None)
        begin = last
    failed_exit = status is not None and status.state is State.FAILED and status.exit_code not in (None, 0)
    if failed_exit and status is not None and not (runs and any(isinstance(e, events.Failed) for e in runs[-1])):
        lane.marks.append(Mark(Kind.FAILURE, begin, f"exited with code {status.exit_code}"))
    return lane


def _mark(event: events.Event) -> Mark | None:
    if isinstance(event, events.CheckpointSaved):
        return Mark(Kind.BACKUP, event.time, f"backup (epoch {event.epoch})")
    if isinstance(event, events.Failed):
        code = "" if event.exit_code is None else f", exit code {event.exit_code}"
        return Mark(Kind.FAILURE, event.time, f"failed: {event.reason}{code}")
    if isinstance(event, events.Restored):
        return Mark(Kind.RESTART, event.time, f"restored at step {event.step}")
    if isinstance(event, events.Preempted):
        return Mark(Kind.PREEMPTION, event.time, "preempted" + ("" if event.step is None else f", saved at step {event.step}"))
    if isinstance(event, events.Evaluation):
        shown = ", ".join(f"{name} {value:.4g}" for name, value in event.metrics.items() if value is not None)
        return Mark(Kind.EVALUATION, event.time, f"evaluated {event.checkpoint}" + (f": {shown}" if shown else ""))
    return None


def _step_rate(found: list[events.Event]) -> list[tuple[float, float]]:
    rates = []
    for run in _runs(found):
        steps = [e for e in run if isinstance(e, events.Step)]
        for before, after in zip(steps, steps[1:], strict=False):
            if after.step > before.step and after.time > before.time:
                rates.append(((before.time + after.time) / 2, (after.step - before.step) / (after.time - before.time)))
    return rates


def _loss(found: list[events.Event]) -> list[tuple[int, float]]:
    by_step = [(e.step, e.loss) for e in found if isinstance(e, events.Step) and e.loss is not None]
    if by_step:
        return by_step
    by_epoch = [(e.step if e.step is not None else e.epoch + 1, e.metrics.get("loss")) for e in found if isinstance(e, events.EpochEnd)]
    return [(step, loss) for step, loss in by_epoch if loss is not None]
