"""Backups off the training step's critical path: asynchronous writes that keep the fault table's guarantees.

Contract:

- ``ASYNC``: TensorFlow's asynchronous checkpoint. A save copies every
  variable to host memory on the calling thread (under MultiWorkerMirrored,
  reading a synced variable is a collective, so every task still saves at
  the same steps), then writes that copy from a background thread while
  training goes on. ``CheckpointManager`` records a checkpoint in its state
  file only in the write's done callback, and deletes the older one after
  that: a task killed while a write is in flight restores the previous,
  complete backup, never a torn one.
- ``BackupWriter``: one task's backup writes (``save``), the lead's kept and
  another task's to a scratch directory (every task must take part in a save,
  only the lead keeps it). ``save`` first waits for the write in flight, so
  one write at most is in flight; a scratch copy is overwritten by the next.
  ``settle()`` waits for the write in flight (none: at once) and then removes
  a scratch copy. Settle before anything that reads, replaces or
  removes what a write produces: the synchronous preemption save
  (``launcher.worker.preemption``), the end of training (the final export and
  the backup's deletion come after it), the task's exit.
- ``Backups``: tf_keras' ``BackupAndRestore`` writing through a
  ``BackupWriter``. It removes a scratch copy a killed task left before
  anything reads it: TensorFlow's preemption handler would restore that copy
  (of another step than the lead's backup) on this task. With an
  ``AutoInterval`` it times each backup and each epoch's steps and, at each
  epoch's end, takes the interval the tasks agree on and reports it.
- Asynchronous only where the variables live on this task (MultiWorkerMirrored
  and single-task strategies): the planner never asks it under
  ParameterServer, whose variables live on the ps tasks.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tf_keras.src.distribute import distributed_file_utils

from launcher.protocol import events
from launcher.worker.callbacks import StepTimer
from launcher.worker.interval import AutoInterval

ASYNC = tf.train.CheckpointOptions(enable_async=True)


class BackupWriter:
    """Writes one task's backups, each after the previous one landed (see the module contract)."""

    def __init__(self, write: Callable[[tf.train.CheckpointOptions | None], object], sync: Callable[[], None],
                 scratch: str | None, asynchronous: bool):
        self._write = write
        self._sync = sync
        self.scratch = scratch
        self.asynchronous = asynchronous

    @classmethod
    def of_manager(cls, manager: tf.train.CheckpointManager, asynchronous: bool,
                   scratch: bool = False) -> BackupWriter:
        """Saves through ``manager``; ``scratch``: its directory is a scratch copy, removed once written."""
        return cls(lambda options: manager.save(options=options), manager.sync,
                   manager.directory if scratch else None, asynchronous)

    @classmethod
    def of_scratch(cls, checkpoint: tf.train.Checkpoint, directory: str, asynchronous: bool) -> BackupWriter:
        """Writes ``checkpoint`` into the scratch ``directory`` (a task that takes part but does not keep)."""
        return cls(lambda options: checkpoint.write(posixpath.join(directory, "backup"), options=options),
                   checkpoint.sync, directory, asynchronous)

    def save(self) -> None:
        self._sync()  # one write in flight at most; a scratch copy is overwritten, and removed by ``settle``
        if self.scratch is not None:
            tf.io.gfile.makedirs(self.scratch)
        self._write(ASYNC if self.asynchronous else None)

    def settle(self) -> None:
        """Wait for the write in flight, then remove a scratch copy."""
        self._sync()
        if self.scratch is not None and tf.io.gfile.exists(self.scratch):
            tf.io.gfile.rmtree(self.scratch)


class Backups(tf.keras.callbacks.BackupAndRestore):
    """``BackupAndRestore`` whose saves go through a ``BackupWriter`` (asynchronous when asked)."""

    def __init__(self, backup_dir: str, save_freq: int | str, asynchronous: bool, auto: AutoInterval | None = None,
                 report: Callable[[events.BackupInterval], None] | None = None):
        super().__init__(backup_dir=backup_dir, save_freq=auto.steps if auto else save_freq, delete_checkpoint=False)
        self.asynchronous = asynchronous
        self.auto = auto
        self.report = report
        self.timer = StepTimer()
        self.writer: BackupWriter | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        # A scratch copy left by a task killed mid-training is of another step than the lead's backup, and
        # TensorFlow's preemption handler would restore it on this task: removed before anything reads it.
        scratch = distributed_file_utils.write_dirpath(self.backup_dir, self.model.distribute_strategy)
        if scratch != self.backup_dir and tf.io.gfile.exists(scratch):
            tf.io.gfile.rmtree(scratch)
        super().on_train_begin(logs)
        state = self._training_state
        write = state.write_checkpoint_manager
        self.writer = BackupWriter.of_manager(write, self.asynchronous, scratch=write is not state.read_checkpoint_manager)

    def _backup(self, epoch: int, batch: int = 0) -> None:
        assert self.writer is not None
        if self.auto is not None:
            self.auto.timed(self.writer.save)
        else:
            self.writer.save()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self.timer.reset()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_train_batch_begin(batch, logs)
        self.timer.batch_begin()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.timer.batch_end()
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        if self.auto is not None:
            decided = self.auto.decide(self.timer.mean())
            self.save_freq = decided.steps
            if self.report is not None:
                self.report(decided)

    def settle(self) -> None:
        if self.writer is not None:
            self.writer.settle()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.settle()
        super().on_train_end(logs)
