"""Machine-readable progress events, emitted by tasks on stdout and read by the controller.

Contract: one event per line, ``TFCLUSTER_EVENT <json object>``; the object is
one of the models below, told apart by ``event`` (an ``EventKind`` value), and
always has ``task`` (task name) and ``time`` (unix seconds). Lines without the
prefix are ordinary log output (``carries_event``). Tasks write events with
``emit``; the controller reads them with ``parse_event`` only: a line with the prefix whose
kind is unknown or whose payload does not fit its model is logged (one line)
and skipped, never raised. Fields a model does not know are ignored, so a newer
task can report more than an older controller reads.

To add a field: give it a default in its model (the reader of an older task
sees the default). To add a kind: a value in ``EventKind``, a model with
``event: Literal[EventKind.X]``, a member of ``Event``, and its effect on the
job's progress in ``launcher.protocol.progress``.
This module imports no TensorFlow, so both sides share it.
"""

from __future__ import annotations

import json
import logging
import time
from enum import Enum
from functools import lru_cache
from typing import Annotated, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

PREFIX = "TFCLUSTER_EVENT "

log = logging.getLogger(__name__)

#: Metric values by name (``loss``, ``accuracy``, ...); None where a value was unavailable.
Metrics = dict[str, float | None]


class EventKind(str, Enum):
    STARTED = "started"
    RESTORED = "restored"
    STEP = "step"
    EPOCH = "epoch"
    CHECKPOINT = "checkpoint"
    EVALUATION = "evaluation"
    FINISHED = "finished"
    FAILED = "failed"
    PREEMPTED = "preempted"
    STEP_TIME = "step_time"
    STACKS_ON_SIGNAL = "stacks_on_signal"
    BACKUP_INTERVAL = "backup_interval"
    WARM_START = "warm_start"


def _now() -> float:
    return round(time.time(), 3)


class _Event(BaseModel):
    """What every event carries. ``task`` is filled in by ``emit``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    task: str = ""
    time: float = Field(default_factory=_now)


class Started(_Event):
    """A task began: its strategy and, from a Keras ``fit``, the epochs it runs."""

    event: Literal[EventKind.STARTED] = EventKind.STARTED
    strategy: str
    num_replicas_in_sync: int
    global_batch_size: int | None = None
    role: str | None = None
    index: int | None = None
    epochs: int | None = None


class Restored(_Event):
    """Where ``BackupAndRestore`` resumed: ``epoch`` (from 0), the step within it and the global step."""

    event: Literal[EventKind.RESTORED] = EventKind.RESTORED
    epoch: int
    step_in_epoch: int = 0
    step: int


class Step(_Event):
    """A training step done (global count from 1), every few steps; from the lead task only."""

    event: Literal[EventKind.STEP] = EventKind.STEP
    step: int
    epoch: int | None = None
    total_steps: int | None = None
    loss: float | None = None


class EpochEnd(_Event):
    """Epoch ``epoch`` (from 0) done, with its metrics; from the lead task only."""

    event: Literal[EventKind.EPOCH] = EventKind.EPOCH
    epoch: int
    step: int | None = None
    metrics: Metrics = {}
    #: Share of a step spent waiting for input (None: not measured).
    input_wait_fraction: float | None = None


class CheckpointSaved(_Event):
    event: Literal[EventKind.CHECKPOINT] = EventKind.CHECKPOINT
    path: str
    epoch: int


class Evaluation(_Event):
    """The evaluator evaluated ``checkpoint``."""

    event: Literal[EventKind.EVALUATION] = EventKind.EVALUATION
    checkpoint: str
    metrics: Metrics = {}


class Finished(_Event):
    event: Literal[EventKind.FINISHED] = EventKind.FINISHED
    metrics: Metrics = {}
    model_path: str | None = None


class Failed(_Event):
    event: Literal[EventKind.FAILED] = EventKind.FAILED
    reason: str = "failed"
    exit_code: int | None = None


class Preempted(_Event):
    """The task saved on a termination notice; ``step``: where every training task saved (None: nothing trained)."""

    event: Literal[EventKind.PREEMPTED] = EventKind.PREEMPTED
    step: int | None = None
    exit_code: int | None = None


class StepTime(_Event):
    """A training task's own step times over epoch ``epoch`` (every training task, for stragglers).

    ``seconds_per_step``: its wall time per step (first step left out); ``input_seconds_per_batch``: its
    input pipeline's time per batch from the entrypoint's probe; ``compute_seconds_per_batch``: its
    forward and backward pass per batch, alone (``launcher.worker.compute``); ``peer_wait_seconds_per_step``:
    its wall time per step beyond the larger of those two, waiting for its peers and the all-reduce.
    None: not measured (a user's program, or ParameterServer, where the pipelines live on the workers).
    """

    event: Literal[EventKind.STEP_TIME] = EventKind.STEP_TIME
    epoch: int
    step: int | None = None
    seconds_per_step: float | None = None
    input_seconds_per_batch: float | None = None
    compute_seconds_per_batch: float | None = None
    peer_wait_seconds_per_step: float | None = None


class BackupInterval(_Event):
    """The backup interval the training tasks agreed on (``backup_every_steps: auto``); from the lead task only.

    ``save_seconds``: the lead's median time a backup held training up; ``step_seconds``: its time per step.
    """

    event: Literal[EventKind.BACKUP_INTERVAL] = EventKind.BACKUP_INTERVAL
    steps: int
    save_seconds: float | None = None
    step_seconds: float | None = None


class StacksOnSignal(_Event):
    """The task dumps its threads' stacks on ``signal`` (``launcher.protocol.stacks``): it may be sent it."""

    event: Literal[EventKind.STACKS_ON_SIGNAL] = EventKind.STACKS_ON_SIGNAL
    signal: str


class WarmStart(_Event):
    """The task runs in its standby (``launcher.worker.standby``), which had imported TensorFlow beforehand.

    ``import_seconds``: what those imports took the standby (the time a fresh interpreter would have spent now);
    ``waited_seconds``: how long it then waited to be called.
    """

    event: Literal[EventKind.WARM_START] = EventKind.WARM_START
    import_seconds: float
    waited_seconds: float = 0.0


Event = Annotated[
    Started | Restored | Step | EpochEnd | CheckpointSaved | Evaluation | Finished | Failed | Preempted | StepTime
    | StacksOnSignal | BackupInterval | WarmStart,
    Field(discriminator="event"),
]

_EVENT = TypeAdapter[Event](Event)


def format_event(event: Event, task: str) -> str:
    """The line that carries ``event`` of ``task``."""
    return PREFIX + event.model_copy(update={"task": task}).model_dump_json()


def emit(event: Event, task: str, stream: TextIO) -> None:
    stream.write(format_event(event, task) + "\n")
    stream.flush()


def carries_event(line: str) -> bool:
    """True if ``line`` is meant as an event (valid or not), not ordinary output."""
    return PREFIX in line


def parse_event(line: str) -> Event | None:
    """The event on ``line`` (which may carry a log prefix before the marker); None for any other line.

    A marked line that is not a valid event is logged (each distinct line once per process: the
    Kubernetes backend reads the same log lines at every poll) and gives None.
    """
    at = line.find(PREFIX)
    if at < 0:
        return None
    text = line[at + len(PREFIX):]
    try:
        return _EVENT.validate_json(text)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'event'}: {e['msg']}" for e in exc.errors()[:3])
        _skipped(problem, json.dumps(text[:200]))
        return None


@lru_cache(maxsize=256)
def _skipped(problem: str, text: str) -> None:
    log.warning("skipped a progress event that does not fit the contract (%s): %s", problem, text)
