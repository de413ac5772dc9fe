"""TensorBoard summaries of a run: the lead task's training curves, the evaluator's validation curves.

Contract (log dir = ``RunConfig.tensorboard_dir``; None writes nothing): ``TrainSummaries.open``
(lead task only) writes ``<log dir>/train`` at the global step, first dropping events past
``resume_step`` so a restored run continues its curve; ``ValidationSummaries.open`` (the evaluator)
writes ``<log dir>/validation`` at each checkpoint's step, never at or before one already written.
Both use the same tags; event files go through ``tf.io.gfile`` (``gs://``, ``s3://`` work). Without
the ``tensorboard`` package a task warns and trains without summaries. Users' guide:
docs/user_code.md (TensorBoard summaries).
"""

from __future__ import annotations

import importlib.util
import logging
import posixpath
import time
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from launcher.protocol import paths
from launcher.protocol.runconfig import RunConfig

EVENT_FILE_GLOB = "*tfevents*"
log = logging.getLogger("launcher.worker")


def _log_dir(run_config: RunConfig) -> str | None:
    """The run's log dir if summaries are asked for and ``tf.summary`` can write them (a warning when it cannot)."""
    if run_config.tensorboard_dir is not None and importlib.util.find_spec("tensorboard") is None:
        log.warning("no TensorBoard summaries: the `tensorboard` package is not installed in this task's image")
        return None
    return run_config.tensorboard_dir


def _event_files(directory: str) -> list[str]:
    if not tf.io.gfile.isdir(directory):
        return []
    return sorted(tf.io.gfile.glob(posixpath.join(directory, EVENT_FILE_GLOB)))


def _events(path: str) -> list[Any]:
    """The events of one file; a record cut short by a killed writer ends the file."""
    events = []
    try:
        for record in tf.data.TFRecordDataset(path):
            events.append(tf.compat.v1.Event.FromString(record.numpy()))
    except tf.errors.DataLossError:
        pass
    return events


def last_step(directory: str) -> int | None:
    """The largest step of any summary in ``directory``'s event files, or None."""
    steps = [e.step for path in _event_files(directory) for e in _events(path) if e.HasField("summary")]
    return max(steps) if steps else None


def truncate_after(directory: str, step: int) -> None:
    """Rewrite ``directory``'s event files without the summaries after ``step`` (files left empty go)."""
    for path in _event_files(directory):
        events = _events(path)
        kept = [e for e in events if not (e.HasField("summary") and e.step > step)]
        if len(kept) == len(events):
            continue
        if not any(e.HasField("summary") for e in kept):
            tf.io.gfile.remove(path)
            continue
        scratch = posixpath.join(posixpath.dirname(path), "." + posixpath.basename(path) + ".tmp")
        with tf.io.TFRecordWriter(scratch) as writer:
            for event in kept:
                writer.write(event.SerializeToString())
        tf.io.gfile.rename(scratch, path, overwrite=True)


def _learning_rate(optimizer: Any) -> float | None:
    rate = getattr(optimizer, "learning_rate", None)
    if rate is None:
        return None
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        rate = rate(optimizer.iterations)
    try:
        return float(tf.keras.backend.get_value(rate))  # a (mirrored) variable, a tensor or a float
    except (TypeError, ValueError):
        return None


class _Writer:
    def __init__(self, directory: str):
        tf.io.gfile.makedirs(directory)
        self.writer = tf.summary.create_file_writer(directory)

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        """Write and flush: the curves are live, and a killed task loses no point it wrote."""
        with self.writer.as_default():
            for tag, value in values.items():
                if value is not None:
                    tf.summary.scalar(tag, value, step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class TrainSummaries(_Writer):
    """The lead task's training scalars (see the module contract)."""

    def __init__(self, directory: str, every: int, global_batch: int, optimizer: Any, start_step: int):
        super().__init__(directory)
        self.every = max(every, 1)
        self.global_batch = global_batch
        self.optimizer = optimizer
        self.since = (time.perf_counter(), start_step)  # (time, step) of the last write: examples/s counts from here

    @classmethod
    def open(
        cls, run_config: RunConfig, is_lead: bool, resume_step: int, global_batch: int, optimizer: Any
    ) -> TrainSummaries | None:
        log_dir = _log_dir(run_config) if is_lead else None
        if log_dir is None:
            return None
        directory = paths.summaries_dir(log_dir, paths.TRAIN_SUMMARIES)
        truncate_after(directory, resume_step)
        return cls(directory, run_config.summary_every_steps, global_batch, optimizer, resume_step)

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def write(self, step: int, metrics: Mapping[str, float | None], **extra: float | None) -> None:
        """``metrics`` (loss, compiled metrics) plus learning rate, examples/s and ``extra`` at ``step``."""
        now = time.perf_counter()
        rate = None
        if step > self.since[1] and now > self.since[0]:
            rate = (step - self.since[1]) * self.global_batch / (now - self.since[0])
        self.since = (now, step)
        self.scalars(step, {**metrics, "learning_rate": _learning_rate(self.optimizer),
                            "examples_per_second": rate, **extra})


class ValidationSummaries(_Writer):
    """The evaluator's validation scalars (see the module contract)."""

    def __init__(self, directory: str):
        self.written = last_step(directory)
        super().__init__(directory)

    @classmethod
    def open(cls, run_config: RunConfig, resume_step: int | None) -> ValidationSummaries | None:
        """The writer, after dropping the points past ``resume_step`` (None keeps them: a restarted evaluator)."""
        log_dir = _log_dir(run_config)
        if log_dir is None:
            return None
        directory = paths.summaries_dir(log_dir, paths.VALIDATION_SUMMARIES)
        if resume_step is not None:
            truncate_after(directory, resume_step)
        return cls(directory)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        if self.written is not None and step <= self.written:
            return
        self.scalars(step, metrics)
        self.written = step
