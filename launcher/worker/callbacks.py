"""Keras callbacks of the entrypoint: progress events, TensorBoard summaries and the input-wait fraction.

Contract: ``ProgressCallback`` emits ``step`` events from the lead task every ``every`` steps, at each epoch's
last step and at the first step of each run (a start or a restore: where start-up and a restart end, to the
step), ``epoch`` events from the lead task and, on every
training task, a ``step_time`` event per epoch (wall, input, compute and peer-wait seconds per step;
null where not measured) from which the supervisor names stragglers. Given ``TrainSummaries`` it
writes the batch logs and the input-wait fraction at the global step, before a backup of that step
(put this callback first). ``input_wait_fraction`` = min(1, input seconds per batch / step seconds),
from a probe of ``input_probe``; above ``INPUT_BOUND_FRACTION`` a task warns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from launcher.protocol import events
from launcher.worker.compute import ComputeProbe
from launcher.worker.data import seconds_per_batch
from launcher.worker.reporter import Reporter, scalar
from launcher.worker.summaries import TrainSummaries

INPUT_BOUND_FRACTION = 0.5
PROBE_BATCHES = 5
log = logging.getLogger("launcher.worker")


# Under PSS a step's results stay on the worker that ran it until the coordinator fetches them: a worker that
# left (preempted, failed) after its step took them along. TensorFlow reschedules the steps a lost worker was
# running, not results it had already returned; the coordinator trains on without them.
WORKER_LEFT = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)


def _local(value: Any) -> Any:
    return value.fetch() if hasattr(value, "fetch") else value


def fetched(logs: Any) -> dict[str, Any]:
    """Batch logs as a dict of local values, fetching PSS RemoteValues (one for ``fit``'s logs, one per
    value in the custom loop; fetching waits for the step); empty when the worker that ran the step left."""
    try:
        return {name: _local(value) for name, value in dict(_local(logs) or {}).items()}
    except WORKER_LEFT as error:
        log.warning("a step's logs left with the worker that ran it: %s", str(error).split("\n", 1)[0])
        return {}


class WallTimePerStep:
    """Mean wall seconds per training step over one epoch."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.first_begin: float | None = None
        self.first_end: float | None = None
        self.last_end: float | None = None
        self.steps = 0

    def batch_begin(self) -> None:
        if self.first_begin is None:
            self.first_begin = time.perf_counter()

    def batch_end(self) -> None:
        self.last_end = time.perf_counter()
        if self.first_end is None:
            self.first_end = self.last_end
        self.steps += 1

    def mean(self) -> float | None:
        """Steps after the first when there are some (the first traces the step), else the only one."""
        if self.steps > 1 and self.first_end is not None and self.last_end is not None:
            return (self.last_end - self.first_end) / (self.steps - 1)
        if self.steps == 1 and self.first_begin is not None and self.first_end is not None:
            return self.first_end - self.first_begin
        return None


def input_wait_fraction(input_seconds: float, step_seconds: float) -> float:
    return round(min(1.0, input_seconds / step_seconds), 4) if step_seconds > 0 else 0.0


def peer_wait_seconds(step_seconds: float | None, input_seconds: float | None,
                      compute_seconds: float | None) -> float | None:
    """Wall seconds per step beyond the task's own input and compute (overlapping: the larger); None unmeasured."""
    if step_seconds is None or compute_seconds is None:
        return None
    return round(max(0.0, step_seconds - max(compute_seconds, input_seconds or 0.0)), 6)


class ProgressCallback(tf.keras.callbacks.Callback):
    def __init__(
        self,
        reporter: Reporter,
        steps_per_epoch: int,
        epochs: int,
        every: int,
        input_probe: Iterable[Any] | None,
        summaries: TrainSummaries | None = None,
        compute_probe: ComputeProbe | None = None,
    ):
        super().__init__()
        self._supports_tf_logs = True  # do not force a sync of PSS RemoteValues every batch
        self.reporter = reporter
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = steps_per_epoch * epochs
        self.every = max(every, 1)
        self.timer = WallTimePerStep()
        self.input_probe = input_probe
        self.compute_probe = compute_probe
        self.summaries = summaries
        self.epoch = 0
        self.stepped = False  # this run's first step is reported, whatever its number
        self.batch_loss_scale = 1.0  # custom loop: its loss is already reduced by strategy.reduce

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        # tf_keras reduces batch-level outputs with distribute_reduction_method, "auto" = "sum"
        # (except on TPU): each replica's running-mean loss is summed. Epoch logs are exact.
        strategy = self.model.distribute_strategy
        method = self.model.distribute_reduction_method
        summed = method == "sum" or (method == "auto" and not isinstance(strategy, tf.distribute.TPUStrategy))
        self.batch_loss_scale = 1.0 / strategy.num_replicas_in_sync if summed else 1.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch
        self.timer.reset()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.timer.batch_begin()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.timer.batch_end()
        batch = int(batch)  # a numpy integer when fit resumes mid-epoch
        step = self.epoch * self.steps_per_epoch + batch + 1
        last = batch + 1 == self.steps_per_epoch
        report = (batch + 1) % self.every == 0 or last or not self.stepped
        self.stepped = True
        summaries = self.summaries if self.summaries is not None and (self.summaries.due(step) or last) else None
        if not report and summaries is None:
            return
        values = self._batch_values(logs)
        if report:
            self.reporter.lead(
                events.Step(epoch=self.epoch, step=step, total_steps=self.total_steps, loss=values.get("loss"))
            )
        if summaries is not None:
            summaries.write(step, values)

    def _batch_values(self, logs: Any) -> dict[str, float | None]:
        """Batch logs as floats, each replica's running mean summed back to one (see ``on_train_begin``)."""
        values = {k: scalar(v) for k, v in fetched(logs).items()}
        return {k: None if v is None else v * self.batch_loss_scale for k, v in values.items()}

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        step_seconds = self.timer.mean()
        input_seconds = None if self.input_probe is None or step_seconds is None else \
            seconds_per_batch(self.input_probe, PROBE_BATCHES)
        compute_seconds = None if self.compute_probe is None or self.input_probe is None or step_seconds is None \
            else self.compute_probe.seconds_per_batch(self.input_probe, PROBE_BATCHES)
        fraction = self._input_wait_fraction(epoch, input_seconds, step_seconds)
        self.reporter.emit(events.StepTime(
            epoch=epoch, step=(epoch + 1) * self.steps_per_epoch, seconds_per_step=step_seconds,
            input_seconds_per_batch=input_seconds, compute_seconds_per_batch=compute_seconds,
            peer_wait_seconds_per_step=peer_wait_seconds(step_seconds, input_seconds, compute_seconds)))
        metrics = {k: scalar(v) for k, v in fetched(logs).items()}
        self.reporter.lead(
            events.EpochEnd(epoch=epoch, step=(epoch + 1) * self.steps_per_epoch, metrics=metrics,
                            input_wait_fraction=fraction)
        )
        if self.summaries is not None:  # the epoch's metrics went with its last step
            self.summaries.scalars((epoch + 1) * self.steps_per_epoch, {"input_wait_fraction": fraction})

    def _input_wait_fraction(self, epoch: int, input_seconds: float | None, step_seconds: float | None) -> float | None:
        if input_seconds is None or step_seconds is None:
            return None
        fraction = input_wait_fraction(input_seconds, step_seconds)
        if fraction > INPUT_BOUND_FRACTION:
            log.warning(
                "epoch %d: input-bound: the input pipeline needs %.1f ms per batch, %.0f%% of the %.1f ms step",
                epoch, input_seconds * 1000, fraction * 100, step_seconds * 1000,
            )
        return fraction


class CheckpointEvents(tf.keras.callbacks.Callback):
    """Emits a ``checkpoint`` event after ``ModelCheckpoint`` wrote an epoch (put it after that callback)."""

    def __init__(self, reporter: Reporter, pattern: str):
        super().__init__()
        self.reporter = reporter
        self.pattern = pattern

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.reporter.lead(events.CheckpointSaved(epoch=epoch, path=self.pattern.format(epoch=epoch + 1)))
