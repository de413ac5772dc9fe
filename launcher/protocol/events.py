"""Machine-readable progress events, emitted by tasks on stdout and read by the controller.

Contract: one event per line, ``TFCLUSTER_EVENT/<token> <json object>``, one of the models below told
apart by ``event`` (``EventKind``), always with ``task`` and ``time``. Tasks write with ``emit``; the
controller reads with an ``EventReader`` of the run's token only, counting the marker only at a
line's start; a bad or unknown event is logged and skipped, never raised; unknown fields are ignored.
Every field is bounded where it has a meaning (the types below, the one home of those bounds for both
sides: a task's model refuses what the controller would skip): counts (steps, epochs, totals, indexes,
sizes) are integers from 0 to ``MAX_COUNT``; times are unix seconds from 0 to ``MAX_TIME``;
durations are seconds from 0 to ``MAX_SECONDS`` (neither NaN nor infinite); a fraction is from 0 to 1; names and paths are capped in
length; what would be lost by refusing is cut instead: a reason to ``MAX_TEXT`` characters, an event's
metrics to their first ``MAX_METRICS``; a loss or metric that is not a finite number (a diverging
loss's NaN or infinity) reads as null.
The token is drawn per launch (``new_token``; ``MANUAL_TOKEN`` for dry-run and render). No TensorFlow
is imported. Why the marker and token rules: docs/architecture.md (Decisions); to add a field or kind (a new field
has a default, so an older task's events still read): docs/architecture.md.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import secrets
import time
from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from typing import Annotated, Literal, TextIO

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from launcher.protocol import env

MARKER = "TFCLUSTER_EVENT"
#: The token of a plan that is not a launch (dry-run, ``render``; tests): fixed, so previews are reproducible.
MANUAL_TOKEN = "manual"

log = logging.getLogger(__name__)

#: The largest count an event carries (a step, an epoch, a total, an index, a batch size): 10^15.
MAX_COUNT = 10**15
#: The latest time an event carries, in unix seconds: the end of the year 9999.
MAX_TIME = 253_402_300_799.0
#: The longest duration an event carries, in seconds (about 31,700 years): a count times a duration stays finite.
MAX_SECONDS = 1e12
#: The longest name (task, strategy, role, signal, metric) and path an event carries, in characters.
MAX_NAME = 256
MAX_PATH = 4096
#: A reason longer than this many characters is cut to it (with ``…``): a failure's reason is kept, not refused.
MAX_TEXT = 1000
#: The most metrics one event keeps: further ones are left out (a model with many outputs still reports).
MAX_METRICS = 256
#: The longest note about a skipped event (its problem, then its text), in characters.
MAX_NOTE = 200
#: The most notes one reader logs: the first ones tell what is wrong; a program writing malformed events in a loop
#: does not fill the controller's log with one note per line.
MAX_NOTES = 100


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def _finite_or_none(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _first_metrics(metrics: dict[str, float | None]) -> dict[str, float | None]:
    return metrics if len(metrics) <= MAX_METRICS else dict(itertools.islice(metrics.items(), MAX_METRICS))


#: A number of things (steps, epochs, tasks, examples).
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
#: A point in time, unix seconds.
Time = Annotated[float, Field(ge=0, le=MAX_TIME, allow_inf_nan=False)]
#: A duration in seconds.
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
#: A process's exit code (negative: the signal that ended a local process).
ExitStatus = Annotated[int, Field(ge=-255, le=255)]
Name = Annotated[str, StringConstraints(max_length=MAX_NAME)]
Path = Annotated[str, StringConstraints(max_length=MAX_PATH)]
Text = Annotated[str, AfterValidator(_cut)]
#: A loss or metric value: a finite number, else None (unavailable, or NaN or infinite).
Value = Annotated[float | None, AfterValidator(_finite_or_none)]
#: Metric values by name (``loss``, ``accuracy``, ...); None where a value was unavailable.
Metrics = Annotated[dict[Name, Value], AfterValidator(_first_metrics)]


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

    task: Name = ""
    time: Time = Field(default_factory=_now)


class Started(_Event):
    """A task began: its strategy and, from a Keras ``fit``, the epochs it runs."""

    event: Literal[EventKind.STARTED] = EventKind.STARTED
    strategy: Name
    num_replicas_in_sync: Count
    global_batch_size: Count | None = None
    role: Name | None = None
    index: Count | None = None
    epochs: Count | None = None


class Restored(_Event):
    """Where ``BackupAndRestore`` resumed: ``epoch`` (from 0), the step within it and the global step."""

    event: Literal[EventKind.RESTORED] = EventKind.RESTORED
    epoch: Count
    step_in_epoch: Count = 0
    step: Count


class Step(_Event):
    """A training step done (global count from 1), every few steps and the first of each run; from the lead task only."""

    event: Literal[EventKind.STEP] = EventKind.STEP
    step: Count
    epoch: Count | None = None
    total_steps: Count | None = None
    loss: Value = None


class EpochEnd(_Event):
    """Epoch ``epoch`` (from 0) done, with its metrics; from the lead task only."""

    event: Literal[EventKind.EPOCH] = EventKind.EPOCH
    epoch: Count
    step: Count | None = None
    metrics: Metrics = {}
    #: Share of a step spent waiting for input (None: not measured).
    input_wait_fraction: Fraction | None = None


class CheckpointSaved(_Event):
    event: Literal[EventKind.CHECKPOINT] = EventKind.CHECKPOINT
    path: Path
    epoch: Count


class Evaluation(_Event):
    """The evaluator evaluated ``checkpoint``."""

    event: Literal[EventKind.EVALUATION] = EventKind.EVALUATION
    checkpoint: Path
    metrics: Metrics = {}


class Finished(_Event):
    event: Literal[EventKind.FINISHED] = EventKind.FINISHED
    metrics: Metrics = {}
    model_path: Path | None = None


class Failed(_Event):
    event: Literal[EventKind.FAILED] = EventKind.FAILED
    reason: Text = "failed"
    exit_code: ExitStatus | None = None


class Preempted(_Event):
    """The task saved on a termination notice; ``step``: where every training task saved (None: nothing trained)."""

    event: Literal[EventKind.PREEMPTED] = EventKind.PREEMPTED
    step: Count | None = None
    exit_code: ExitStatus | None = None


class StepTime(_Event):
    """A training task's own step times over epoch ``epoch`` (every training task, for stragglers).

    ``seconds_per_step``: its wall time per step (first step left out); ``input_seconds_per_batch``: its
    input pipeline's time per batch from the entrypoint's probe; ``compute_seconds_per_batch``: its
    forward and backward pass per batch, alone (``launcher.worker.compute``); ``peer_wait_seconds_per_step``:
    its wall time per step beyond the larger of those two, waiting for its peers and the all-reduce.
    None: not measured (a user's program, or ParameterServer, where the pipelines live on the workers).
    """

    event: Literal[EventKind.STEP_TIME] = EventKind.STEP_TIME
    epoch: Count
    step: Count | None = None
    seconds_per_step: Seconds | None = None
    input_seconds_per_batch: Seconds | None = None
    compute_seconds_per_batch: Seconds | None = None
    peer_wait_seconds_per_step: Seconds | None = None


class BackupInterval(_Event):
    """The backup interval the training tasks agreed on (``backup_every_steps: auto``); from the lead task only.

    ``save_seconds``: the lead's median time a backup held training up; ``step_seconds``: its time per step;
    ``mtbf_seconds``: the mean time between failures it assumed (None: none known); ``reason``: why, for a person.
    """

    event: Literal[EventKind.BACKUP_INTERVAL] = EventKind.BACKUP_INTERVAL
    steps: Count
    save_seconds: Seconds | None = None
    step_seconds: Seconds | None = None
    mtbf_seconds: Seconds | None = None
    reason: Text | None = None


class StacksOnSignal(_Event):
    """The task dumps its threads' stacks on ``signal`` (``launcher.protocol.stacks_signal``): it may be sent it."""

    event: Literal[EventKind.STACKS_ON_SIGNAL] = EventKind.STACKS_ON_SIGNAL
    signal: Name


class WarmStart(_Event):
    """The task runs in its standby (``launcher.worker.standby``), which had imported TensorFlow beforehand.

    ``import_seconds``: what those imports took the standby (the time a fresh interpreter would have spent now);
    ``waited_seconds``: how long it then waited to be called.
    """

    event: Literal[EventKind.WARM_START] = EventKind.WARM_START
    import_seconds: Seconds
    waited_seconds: Seconds = 0.0


Event = Annotated[
    Started | Restored | Step | EpochEnd | CheckpointSaved | Evaluation | Finished | Failed | Preempted | StepTime
    | StacksOnSignal | BackupInterval | WarmStart,
    Field(discriminator="event"),
]

_EVENT = TypeAdapter[Event](Event)


def new_token() -> str:
    """A fresh token for one launch: 128 random bits, as hex (no space, no ``/``)."""
    return secrets.token_hex(16)


def task_token(environ: Mapping[str, str] = os.environ) -> str:
    """The run's token as a task has it (``TFCLUSTER_EVENT_TOKEN``); empty outside tfcluster."""
    return environ.get(env.EVENT_TOKEN, "")


def _marker(token: str) -> str:
    return f"{MARKER}/{token} "


def format_event(event: Event, task: str, token: str) -> str:
    """The line that carries ``event`` of ``task`` in the run of ``token`` (a carriage return first, no newline)."""
    return "\r" + _marker(token) + event.model_copy(update={"task": task}).model_dump_json()


def emit(event: Event, task: str, stream: TextIO, token: str) -> None:
    stream.write(format_event(event, task, token) + "\n")
    stream.flush()


class EventReader:
    """The events of the run whose token is ``token`` in its tasks' output lines; every other line is output.

    An empty token (a plan or Job from before tokens) accepts no line.
    """

    def __init__(self, token: str):
        self._marker = _marker(token) if token else None
        self._malformed = 0

    @property
    def reads(self) -> bool:
        """False for an empty token: no line can be an event (so no progress can be seen either)."""
        return self._marker is not None

    def _payload(self, line: str) -> str | None:
        """What follows this run's marker at the line's start (after its last carriage return), else None."""
        shown = line.rstrip("\r\n")
        shown = shown[shown.rfind("\r") + 1:]
        if self._marker is None or not shown.startswith(self._marker):
            return None
        return shown[len(self._marker):]

    def carries_event(self, line: str) -> bool:
        """True if ``line`` is meant as an event of this run (valid or not), not ordinary output."""
        return self._payload(line) is not None

    def parse(self, line: str) -> Event | None:
        """The event on ``line``; None for any other line.

        A line of this run's that is not a valid event is logged (each distinct line once per process: the
        Kubernetes backend reads the same log lines at every poll; the note's problem and text are cut to
        ``MAX_NOTE`` characters each; after ``MAX_NOTES`` such lines, one note says the reader notes no more)
        and gives None.
        """
        text = self._payload(line)
        if text is None:
            return None
        try:
            return _EVENT.validate_json(text)
        except ValidationError as exc:
            self._malformed += 1
            if self._malformed <= MAX_NOTES:
                problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'event'}: {e['msg']}" for e in exc.errors()[:3])
                _skipped(problem[:MAX_NOTE], json.dumps(text[:MAX_NOTE]))
            elif self._malformed == MAX_NOTES + 1:
                log.warning("skipped %d progress events that do not fit the contract: further ones are skipped "
                            "without a note", MAX_NOTES)
            return None


@lru_cache(maxsize=256)
def _skipped(problem: str, text: str) -> None:
    log.warning("skipped a progress event that does not fit the contract (%s): %s", problem, text)
