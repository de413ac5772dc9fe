"""Keras callbacks of the entrypoint: progress events and input-wait measurement.

Contract: ``ProgressCallback`` emits ``step`` events (chief, every
``every`` steps and at the end of each epoch; the loss is the running mean of
the epoch, per replica) and ``epoch`` events with the
epoch's logs and ``input_wait_fraction``: the share of the epoch's wall time
spent between one batch's end and the next batch's begin, i.e. host time
outside the compiled step. It logs a warning when that share exceeds
``INPUT_BOUND_FRACTION``. Under tf_keras ``fit`` the iterator's ``next`` runs
inside the compiled train function, so a pipeline that cannot keep up shows
as slower steps, not as a gap; the fraction therefore flags host-side stalls
(Python input, callbacks, PSS scheduling) and is a lower bound of input wait.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import tensorflow as tf

from launcher.events import EventKind
from launcher.worker.reporter import Reporter, scalar

INPUT_BOUND_FRACTION = 0.5
log = logging.getLogger("launcher.worker")


def _fetched(logs: Any) -> dict[str, Any]:
    """Batch logs as a dict: under PSS they arrive as one RemoteValue (fetching waits for the step)."""
    if hasattr(logs, "fetch"):
        logs = logs.fetch()
    return dict(logs or {})


class InputWaitMeter:
    """Accumulates step time and inter-step gaps for one epoch."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.epoch_start = time.perf_counter()
        self.last_end: float | None = None
        self.waiting = 0.0

    def batch_begin(self) -> None:
        if self.last_end is not None:
            self.waiting += time.perf_counter() - self.last_end

    def batch_end(self) -> None:
        self.last_end = time.perf_counter()

    def fraction(self) -> float:
        total = time.perf_counter() - self.epoch_start
        return self.waiting / total if total > 0 else 0.0


class ProgressCallback(tf.keras.callbacks.Callback):
    def __init__(self, reporter: Reporter, steps_per_epoch: int, epochs: int, every: int):
        super().__init__()
        self._supports_tf_logs = True  # do not force a sync of PSS RemoteValues every batch
        self.reporter = reporter
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = steps_per_epoch * epochs
        self.every = max(every, 1)
        self.meter = InputWaitMeter()
        self.epoch = 0
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
        self.meter.reset()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.meter.batch_begin()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.meter.batch_end()
        batch = int(batch)  # a numpy integer when fit resumes mid-epoch
        if (batch + 1) % self.every == 0 or batch + 1 == self.steps_per_epoch:
            loss = scalar(_fetched(logs).get("loss"))
            self.reporter.chief(
                EventKind.STEP,
                epoch=self.epoch,
                step=self.epoch * self.steps_per_epoch + batch + 1,
                total_steps=self.total_steps,
                loss=None if loss is None else loss * self.batch_loss_scale,
            )

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        fraction = round(self.meter.fraction(), 4)
        if fraction > INPUT_BOUND_FRACTION:
            log.warning("epoch %d: %.0f%% of step time waiting for input: input-bound", epoch, fraction * 100)
        metrics = {k: scalar(v) for k, v in _fetched(logs).items()}
        self.reporter.chief(
            EventKind.EPOCH,
            epoch=epoch,
            step=(epoch + 1) * self.steps_per_epoch,
            input_wait_fraction=fraction,
            **metrics,
        )


class CheckpointEvents(tf.keras.callbacks.Callback):
    """Emits a ``checkpoint`` event after ``ModelCheckpoint`` wrote an epoch (put it after that callback)."""

    def __init__(self, reporter: Reporter, pattern: str):
        super().__init__()
        self.reporter = reporter
        self.pattern = pattern

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.reporter.chief(EventKind.CHECKPOINT, epoch=epoch, path=self.pattern.format(epoch=epoch + 1))
