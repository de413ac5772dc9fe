"""Backups off the training step's critical path: asynchronous writes that keep the fault table's guarantees.

Contract: a task killed mid-write restores the previous complete backup, never a torn one.
``ASYNC`` is TensorFlow's asynchronous checkpoint; ``compile_background_writes`` traces the
background write once when every saved object is a variable; ``BackupWriter.save`` keeps one write
in flight at most (the lead's kept, others' to scratch), and ``settle()`` waits for it and removes a
scratch copy: call it before anything reads, replaces or removes a write's output. ``Backups`` is
tf_keras' ``BackupAndRestore`` through a ``BackupWriter``. Asynchronous only where the variables
live on this task (never under ParameterServer). Users' guide:
docs/faults.md (Backups).
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.checkpoint import functional_saver
from tf_keras.src.distribute import distributed_file_utils

from launcher.protocol import events
from launcher.worker.callbacks import WallTimePerStep
from launcher.worker.interval import AutoInterval

ASYNC = tf.train.CheckpointOptions(enable_async=True)


def compile_background_writes(checkpoint: tf.train.Checkpoint) -> None:
    """Write ``checkpoint``'s asynchronous saves as one traced SaveV2 (see the module contract)."""
    helper = checkpoint._async_checkpointer()  # TensorFlow's own asynchronous checkpoint (created on first use)
    saver = helper.checkpointer()._saver  # writes the host copy, from TensorFlow's background thread
    if getattr(saver, "compiled_by_tfcluster", False):
        return
    eager_save = saver.save
    traced: list[Callable[[tf.Tensor], tf.Tensor] | None] = []  # decided once, at the first write: the copy exists

    def save(file_prefix: str, checkpoint_number: int | None = None, session: object = None,
             options: tf.train.CheckpointOptions | None = None) -> object:
        if not traced:
            traced.append(_single_shard_write(saver, helper._default_device) if _only_variables(helper, saver) else None)
        write = traced[0]
        if checkpoint_number is not None or write is None:
            return eager_save(file_prefix, checkpoint_number, session, options)
        tf.io.gfile.makedirs(posixpath.dirname(file_prefix))  # as the eager write does
        return write(tf.constant(file_prefix))

    saver.save = save
    saver.compiled_by_tfcluster = True


def reads_collectively(checkpoint: tf.train.Checkpoint) -> bool:
    """Reading ``checkpoint``'s values takes every task: it holds a variable synchronized on read."""
    return any(isinstance(t, tf.Variable) and t.synchronization == tf.VariableSynchronization.ON_READ
               for t in tf.train.TrackableView(checkpoint).descendants())


def _only_variables(helper: Any, saver: Any) -> bool:
    """Every object the write serializes is a copied variable: nothing a trace would freeze."""
    if not all(isinstance(t, tf.Variable) for t in helper._saveable_trackables):
        return False
    _, python_state, registered_savers, _ = saver._gather_serialized_tensors(None)
    return not python_state and not registered_savers


def _single_shard_write(saver: Any, device: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """The checkpoint's tensors, gathered as TensorFlow's saver gathers them, written by one SaveV2 at ``prefix``.

    The same files as a single-task save (``prefix.index``, ``prefix.data-00000-of-00001``; SaveV2 writes
    temporary files and renames them, the index last) without the per-task shards and their merge.
    """
    task = tf.DeviceSpec.from_string(device)

    @tf.function
    def write(prefix: tf.Tensor) -> tf.Tensor:
        serialized, _, _, _ = saver._gather_serialized_tensors(None)
        shard: dict[str, dict[str, Any]] = {}
        for _, task_shards in functional_saver.MultiDeviceSaver(serialized)._get_shards_by_task(None):
            for task_shard in task_shards:
                for key, slices in task_shard.items():
                    shard.setdefault(key, {}).update(slices)
        with tf.control_dependencies([functional_saver._single_shard_save(prefix, shard, task)]):
            return tf.identity(prefix)

    return write


class BackupWriter:
    """Writes one task's backups, each after the previous one landed (see the module contract)."""

    def __init__(self, checkpoint: tf.train.Checkpoint, write: Callable[[tf.train.CheckpointOptions | None], object],
                 scratch: str | None, asynchronous: bool):
        self.checkpoint = checkpoint
        self._write = write
        self.scratch = scratch
        self.asynchronous = asynchronous
        self.saved = False
        self.skips = False  # a scratch copy whose later saves read local values only (see the module contract)

    @classmethod
    def of_manager(cls, manager: tf.train.CheckpointManager, asynchronous: bool,
                   scratch: bool = False) -> BackupWriter:
        """Saves through ``manager``; ``scratch``: its directory is a scratch copy, removed once written."""
        return cls(manager.checkpoint, lambda options: manager.save(options=options),
                   manager.directory if scratch else None, asynchronous)

    @classmethod
    def of_scratch(cls, checkpoint: tf.train.Checkpoint, directory: str, asynchronous: bool) -> BackupWriter:
        """Writes ``checkpoint`` into the scratch ``directory`` (a task that takes part but does not keep)."""
        return cls(checkpoint, lambda options: checkpoint.write(posixpath.join(directory, "backup"), options=options),
                   directory, asynchronous)

    def save(self) -> None:
        if self.skips:
            return
        if not self.saved:
            self.saved = True
            self.skips = self.scratch is not None and not reads_collectively(self.checkpoint)
            if self.asynchronous:
                compile_background_writes(self.checkpoint)
        self.checkpoint.sync()  # one write in flight at most; a scratch copy is overwritten, and removed by ``settle``
        if self.scratch is not None:
            tf.io.gfile.makedirs(self.scratch)
        self._write(ASYNC if self.asynchronous else None)

    def settle(self) -> None:
        """Wait for the write in flight, then remove a scratch copy."""
        self.checkpoint.sync()
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
        self.timer = WallTimePerStep()
        self.writer: BackupWriter | None = None
        self.batch: int | None = None  # the batch last begun (tf_keras' batch hooks run: other callbacks need them)

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
        self.record_batch()
        if self.auto is not None:
            self.auto.timed(self.writer.save)
        else:
            self.writer.save()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self.timer.reset()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.batch = batch  # assigned to the checkpoint by ``record_batch``, not at every step
        self.timer.batch_begin()

    def record_batch(self) -> None:
        """The batch last begun, into the checkpoint's batch variable (as tf_keras assigns it at each begin)."""
        if self.batch is not None and not isinstance(self.model.distribute_strategy,
                                                     tf.distribute.ParameterServerStrategy):
            self._training_state._ckpt_saved_batch.assign(self.batch)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.timer.batch_end()
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        if self.auto is not None:
            decided = self.auto.decide(self.timer.mean(), time.time())
            self.save_freq = decided.steps
            if self.report is not None:
                self.report(decided)

    def settle(self) -> None:
        if self.writer is not None:
            self.writer.settle()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.settle()
        super().on_train_end(logs)
