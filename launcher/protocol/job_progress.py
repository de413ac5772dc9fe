"""A job's progress, folded from its tasks' events: the one place that says what an event changes.

Contract: ``seed(run_config)`` is the progress of a job before any event
(what the run config already tells: the epochs and steps the built-in
entrypoint runs); ``progress(previous, event)`` is the progress after one
more event, for an event that ``counts(event, from_lead)``: the lead task's
training events and any task's evaluations. Every backend feeds its tasks'
events through these, so the live view and ``status -o json`` show the same
fields everywhere. Pure: no I/O, no clock.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from launcher.protocol.events import (
    BackupInterval,
    EpochEnd,
    Evaluation,
    Event,
    EventKind,
    Finished,
    Metrics,
    Restored,
    Started,
    Step,
)
from launcher.protocol.runconfig import RunConfig

#: The lead task's events that make up the job's progress.
LEAD_EVENTS = frozenset({EventKind.STARTED, EventKind.RESTORED, EventKind.STEP, EventKind.EPOCH, EventKind.FINISHED,
                         EventKind.BACKUP_INTERVAL})


class JobProgress(BaseModel):
    """How far the job's training is (``JobStatus.progress``); None: not known yet."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    #: The latest event folded in, and its time (unix seconds).
    event: EventKind | None = None
    time: float | None = None
    strategy: str | None = None
    num_replicas_in_sync: int | None = None
    global_batch_size: int | None = None
    #: Epochs the job runs, and the epoch the latest event was in (from 0).
    epochs: int | None = None
    epoch: int | None = None
    #: Global steps done (from 1) and in all.
    step: int | None = None
    total_steps: int | None = None
    #: The latest training loss: of a step, else of an epoch.
    loss: float | None = None
    #: The latest epoch's metrics, then the final ones.
    metrics: Metrics = {}
    input_wait_fraction: float | None = None
    #: The latest evaluation's metrics (an evaluator task).
    evaluation: Metrics | None = None
    model_path: str | None = None
    #: Steps between backups: the spec's number, or the one ``auto`` chose (None: per epoch, or not chosen yet).
    backup_every_steps: int | None = None
    #: Why ``auto`` chose that interval (``launcher.worker.interval.choose``); None for the spec's number.
    backup_reason: str | None = None

    @property
    def reported(self) -> bool:
        """True if the job's program reports progress (the entrypoint, a ``ProgressCallback``, ``report_*``)."""
        return self.event is not None or self.epochs is not None


def seed(run_config: RunConfig) -> JobProgress:
    """The progress of a job before its first event."""
    if not run_config.lead_runs_entrypoint:
        return JobProgress()
    training = run_config.training
    every = run_config.backup_every_steps
    return JobProgress(epochs=training.epochs, total_steps=training.epochs * training.steps_per_epoch,
                       backup_every_steps=every if isinstance(every, int) else None)


def counts(event: Event, from_lead: bool) -> bool:
    """True if ``event`` changes the job's progress (``from_lead``: the lead task wrote it)."""
    return event.event is EventKind.EVALUATION or (from_lead and event.event in LEAD_EVENTS)


def progress(previous: JobProgress, event: Event) -> JobProgress:
    """The job's progress after ``event``."""
    changes: dict[str, object] = {"event": event.event, "time": event.time}
    if isinstance(event, Started):
        changes.update(strategy=event.strategy, num_replicas_in_sync=event.num_replicas_in_sync,
                       global_batch_size=event.global_batch_size)
        if event.epochs is not None:
            changes["epochs"] = event.epochs
    elif isinstance(event, Restored):
        changes.update(epoch=event.epoch, step=event.step)
    elif isinstance(event, Step):
        changes.update(step=event.step, loss=event.loss)
        if event.epoch is not None:
            changes["epoch"] = event.epoch
        if event.total_steps:
            changes["total_steps"] = event.total_steps
    elif isinstance(event, EpochEnd):
        changes.update(epoch=event.epoch, metrics=event.metrics, input_wait_fraction=event.input_wait_fraction)
        if event.step is not None:
            changes["step"] = event.step
        if "loss" in event.metrics:
            changes["loss"] = event.metrics["loss"]
    elif isinstance(event, Finished):
        changes.update(model_path=event.model_path)
        if event.metrics:
            changes["metrics"] = event.metrics
    elif isinstance(event, Evaluation):
        return previous.model_copy(update={"evaluation": event.metrics})
    elif isinstance(event, BackupInterval):
        return previous.model_copy(update={"backup_every_steps": event.steps, "backup_reason": event.reason})
    else:
        return previous
    return previous.model_copy(update=changes)


def fold(previous: JobProgress, events: list[Event], from_lead: bool) -> JobProgress:
    """``progress`` over those of ``events`` that count, in order."""
    for event in events:
        if counts(event, from_lead):
            previous = progress(previous, event)
    return previous
