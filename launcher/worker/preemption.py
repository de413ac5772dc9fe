"""Termination notices (SIGTERM): a coordinated save, then the ``preempted`` exit.

Contract: ``exit_on_notice()`` makes SIGTERM raise ``Preempted(None)`` at once (nothing to save).
``CoordinatedSave`` wraps TensorFlow's ``PreemptionCheckpointHandler``: ``after_step(step)`` makes
every training task save the run's backup at the same step once any got SIGTERM, then raises
``Preempted(step)``; backups are settled before and after. ``FitPreemption`` is that for ``fit``;
``CoordinatorSave`` is ParameterServer's coordinator's save at an epoch boundary. Where TensorFlow
disables its handler (Google Cloud CPU/TPU VMs) the last backup is used. How it shows in a run:
docs/faults.md (Preemptions).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

import tensorflow as tf

from launcher.worker.backups import Backups
from launcher.worker.errors import Preempted


def exit_on_notice() -> None:
    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise Preempted(None)

    signal.signal(signal.SIGTERM, on_sigterm)


class CoordinatedSave:
    """TensorFlow's ``PreemptionCheckpointHandler`` with ``Preempted`` as its exit (see the module contract)."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        read_manager: tf.train.CheckpointManager,
        write_manager: tf.train.CheckpointManager | None = None,
        save_fn: Callable[[], None] | None = None,
        settle: Callable[[], None] | None = None,
    ):
        self.step: int | None = None
        self.read_manager = read_manager
        self.write_manager = write_manager or read_manager
        save = save_fn or self.write_manager.save

        def settled_save() -> None:
            # The backup write in flight lands first, so the preemption save is the last one; the preemption
            # save itself is synchronous (TensorFlow writes synchronously in its preemption context).
            if settle is not None:
                settle()
            save()
            if settle is not None:
                settle()

        # Single-task strategies have no cluster: the handler runs in its local mode.
        multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        config = tf.distribute.experimental.TerminationConfig(exit_fn=self._exit, save_fn=settled_save)
        self.handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            strategy.cluster_resolver if multi_worker else None, self.write_manager, termination_config=config
        )
        # A non-chief writes to a scratch manager but restores the chief's, as tf_keras' WorkerTrainingState does.
        self.handler._read_checkpoint_manager = read_manager

    def after_step(self, step: int) -> None:
        """``step`` (global, 1-based) is done on this task; saves and raises ``Preempted`` when it is the step to save."""
        self.step = step
        self.handler.save_checkpoint_if_preempted()

    def _exit(self) -> None:
        if self.write_manager is not self.read_manager and tf.io.gfile.exists(self.write_manager.directory):
            tf.io.gfile.rmtree(self.write_manager.directory)  # a non-chief's scratch copy
        raise Preempted(self.step)


class FitPreemption(tf.keras.callbacks.Callback):
    """``CoordinatedSave`` for ``fit``: the save is ``BackupAndRestore``'s backup (put it right after that callback)."""

    def __init__(self, steps_per_epoch: int, backups: Backups):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.backups = backups
        self.epoch = 0
        self.save: CoordinatedSave | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        state = self.model._training_state  # BackupAndRestore's, created in its on_train_begin

        def save() -> None:
            self.backups.record_batch()
            state.write_checkpoint_manager.save()

        self.save = CoordinatedSave(
            self.model.distribute_strategy, state.read_checkpoint_manager, state.write_checkpoint_manager,
            save_fn=save, settle=self.backups.settle,
        )

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # The save records (epoch, this batch) first (``Backups.record_batch``): a restore resumes after it.
        if self.save is not None:
            self.save.after_step(self.epoch * self.steps_per_epoch + int(batch) + 1)


class CoordinatorSave(tf.keras.callbacks.Callback):
    """``fit`` under ParameterServer, on the coordinator: save the weights on SIGTERM (see the module contract)."""

    def __init__(self, steps_per_epoch: int):
        super().__init__()
        self._supports_tf_logs = True  # its batch hook never reads the logs (PSS RemoteValues)
        self.steps_per_epoch = steps_per_epoch
        self.epoch = 0
        self.noticed = False

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            self.noticed = True

        signal.signal(signal.SIGTERM, on_sigterm)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if not self.noticed:
            return
        self.model._cluster_coordinator.join()  # the steps already scheduled reach the ps
        state = self.model._training_state  # BackupAndRestore's
        state._ckpt_saved_epoch.assign(self.epoch - 1)
        state.back_up(self.epoch - 1)
        raise Preempted(self.epoch * self.steps_per_epoch)
