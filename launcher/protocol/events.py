"""Machine-readable progress events, emitted by the entrypoint on stdout and read by backends.

Contract: one event per line, ``TFCLUSTER_EVENT <json object>``; the object
always has ``event`` (an ``EventKind`` value), ``task`` (task name) and
``time`` (unix seconds). Lines without the prefix are ordinary log output.
This module imports no TensorFlow, so both sides share it.
"""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Any, TextIO

PREFIX = "TFCLUSTER_EVENT "


class EventKind(str, Enum):
    STARTED = "started"  # strategy, num_replicas_in_sync
    RESTORED = "restored"  # epoch, step: where BackupAndRestore resumed
    STEP = "step"  # epoch, step, total_steps, loss (every few steps, chief only)
    EPOCH = "epoch"  # epoch, step, loss, metrics..., input_wait_fraction
    CHECKPOINT = "checkpoint"  # path, epoch
    EVALUATION = "evaluation"  # checkpoint, metrics (evaluator)
    FINISHED = "finished"  # metrics, model_path
    FAILED = "failed"  # reason
    PREEMPTED = "preempted"  # step: the step every training task saved at (None: nothing trained)
    STEP_TIME = "step_time"  # epoch, step, seconds_per_step, input_seconds_per_batch: every training task's own
    STACKS_ON_SIGNAL = "stacks_on_signal"  # signal: the task dumps its stacks on it (``launcher.protocol.stacks``)


#: The events that make up a job's progress (``JobStatus.progress``), read from the lead task.
PROGRESS_EVENTS = frozenset({EventKind.STARTED, EventKind.RESTORED, EventKind.STEP, EventKind.EPOCH, EventKind.FINISHED})


def format_event(kind: EventKind, task: str, **fields: Any) -> str:
    payload = {"event": kind.value, "task": task, "time": round(time.time(), 3), **fields}
    return PREFIX + json.dumps(payload, separators=(",", ":"), default=str)


def emit(kind: EventKind, task: str, stream: TextIO, **fields: Any) -> None:
    stream.write(format_event(kind, task, **fields) + "\n")
    stream.flush()


def parse_event(line: str) -> dict[str, Any] | None:
    """The event on ``line`` (which may carry a log prefix before the marker), or None."""
    at = line.find(PREFIX)
    if at < 0:
        return None
    try:
        event = json.loads(line[at + len(PREFIX):])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None
