"""Training on the chief/workers (MWMS, single task) and on the PSS coordinator.

Contract: ``train(ctx)`` builds the strategy, the user's model inside its
scope and the input, resumes from ``<checkpoint_dir>/backup`` when a backup
exists (emitting ``restored``), trains with ``fit`` or the user's
``train_step`` (``training.loop``), writes per-epoch weights checkpoints
(the lead task only keeps them), exports the final model and, on the lead task, deletes
the backup and writes the DONE marker: the backup outlives the export, so a
task lost during it (a peer, the ps) resumes at the end, not from scratch.
Events: started, restored, step, epoch, checkpoint, finished. The lead task writes the training summaries (``launcher.worker.summaries``)
in both loops, through the progress callback. Backups are step-granular when ``RunConfig.backup_every_steps`` is
set (MWMS / single task), per epoch otherwise (PSS). Under MWMS and single
tasks a SIGTERM to any training task makes all of them save at the same step
and raise ``TerminationNotice`` (``launcher.worker.preemption``).
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from launcher.protocol import checkpoint_layout, events
from launcher.spec.models import Strategy, TrainingLoop
from launcher.worker import data, lifecycle
from launcher.worker.artifacts import lead_or_scratch
from launcher.worker.backups import Backups, BackupWriter
from launcher.worker.callbacks import CheckpointEvents, ProgressEvents, fetched
from launcher.worker.compute import ComputeProbe
from launcher.worker.context import TaskContext
from launcher.worker.interval import INITIAL_STEPS, AutoInterval
from launcher.worker.preemption import CoordinatedSave, CoordinatorSave, FitPreemption, exit_on_notice
from launcher.worker.reporter import scalar
from launcher.worker.restore import ResumePoint, resume_point
from launcher.worker.strategies import build_strategy
from launcher.worker.summaries import TrainSummaries

STEP_EVENTS_PER_EPOCH = 4


def train(ctx: TaskContext) -> None:
    run_config, training = ctx.run_config, ctx.run_config.training
    strategy = build_strategy(ctx.selection)
    exit_on_notice()  # again: MultiWorkerMirrored's coordination service installs its own SIGTERM notifier
    global_batch = training.batch_size_per_replica * strategy.num_replicas_in_sync
    ctx.reporter.emit(events.Started(
        strategy=type(strategy).__name__,
        num_replicas_in_sync=strategy.num_replicas_in_sync,
        global_batch_size=global_batch,
        role=ctx.selection.role.value if ctx.selection.role else None,
        index=ctx.selection.index,
    ))
    if run_config.backup_every_steps == "auto" and ctx.selection.is_lead:
        lifecycle.record_start(run_config.checkpoint_dir, run_config.run_id, time.time())  # before any collective
    with strategy.scope():
        model = ctx.user.build_model()
    resume = resume_point(
        checkpoint_layout.backup_dir(run_config.checkpoint_dir), training.steps_per_epoch, run_config.backup_every_steps is not None
    )
    if resume is not None:
        ctx.reporter.emit(events.Restored(epoch=resume.epoch, step_in_epoch=resume.step_in_epoch, step=resume.step))
    summaries = TrainSummaries.open(
        run_config, ctx.selection.is_lead, resume.step if resume else 0, global_batch, model.optimizer
    )
    loop = fit_loop if training.loop is TrainingLoop.FIT else custom_loop
    metrics = loop(TrainingRun(ctx, strategy, model, global_batch, resume, summaries))
    if summaries is not None:
        summaries.close()
    model_path = lead_or_scratch(ctx, checkpoint_layout.model_path(run_config.checkpoint_dir), model.save)
    if ctx.selection.is_lead:
        _delete_backup(run_config.checkpoint_dir)
        lifecycle.mark_done(run_config.checkpoint_dir, run_config.run_id)
    ctx.reporter.emit(events.Finished(metrics=metrics, model_path=model_path))


@dataclass(frozen=True)
class TrainingRun:
    """What a training loop gets: the task, its strategy, the model built in its scope, where to resume."""

    ctx: TaskContext
    strategy: tf.distribute.Strategy
    model: tf.keras.Model
    global_batch: int
    resume: ResumePoint | None
    summaries: TrainSummaries | None

    def auto_interval(self) -> AutoInterval | None:
        """The backup interval's measures under ``backup_every_steps: auto``, else None."""
        if self.ctx.run_config.backup_every_steps != "auto":
            return None
        run_config = self.ctx.run_config
        return AutoInterval(self.strategy, initial=min(INITIAL_STEPS, run_config.training.steps_per_epoch),
                            stated_mtbf=run_config.expected_mtbf_seconds,
                            starts=lambda: lifecycle.starts(run_config.checkpoint_dir, run_config.run_id))

    def progress(self, input_probe: Iterable[Any] | None) -> ProgressEvents:
        """Progress events; ``input_probe``: the distributed input to time (and to time the compute on), None under PSS."""
        training = self.ctx.run_config.training
        every = training.steps_per_epoch // STEP_EVENTS_PER_EPOCH
        compute = None if input_probe is None else ComputeProbe(self.model, self.strategy)
        return ProgressEvents(
            self.ctx.reporter, training.steps_per_epoch, training.epochs, every, input_probe, self.summaries, compute
        )


def _dataset_fn(ctx: TaskContext, global_batch: int) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    return lambda input_context: data.finalize(ctx.user.make_dataset(input_context, global_batch))


def _is_pss(ctx: TaskContext) -> bool:
    return ctx.selection.strategy is Strategy.PARAMETER_SERVER


def fit_loop(run: TrainingRun) -> dict[str, float]:
    ctx, model, global_batch = run.ctx, run.model, run.global_batch
    run_config, training = ctx.run_config, ctx.run_config.training
    if _is_pss(ctx):
        # tf_keras fit under PSS takes a DatasetCreator: each worker builds its own pipeline.
        inputs: Any = tf.keras.utils.experimental.DatasetCreator(_dataset_fn(ctx, global_batch))
        progress = run.progress(input_probe=None)
    else:
        inputs = data.finalize(ctx.user.make_dataset(None, global_batch))
        progress = run.progress(input_probe=run.strategy.experimental_distribute_dataset(inputs))
    pattern = checkpoint_layout.checkpoint_pattern(run_config.checkpoint_dir)
    callbacks = [
        # First: a step's curve point is on disk before a backup or a preemption save makes the step one a
        # restart does not train again (the step event then precedes the save).
        progress,
        # The chief deletes the backup once the model is exported (``_delete_backup``).
        backups := Backups(checkpoint_layout.backup_dir(run_config.checkpoint_dir), run_config.backup_every_steps or "epoch",
                           run_config.async_backups, run.auto_interval(), ctx.reporter.lead),
        CoordinatorSave(training.steps_per_epoch) if _is_pss(ctx) else FitPreemption(training.steps_per_epoch, backups),
        # ModelCheckpoint writes non-chief copies to temporary paths and removes them itself.
        tf.keras.callbacks.ModelCheckpoint(pattern, save_weights_only=True),
        CheckpointEvents(ctx.reporter, pattern),
    ]
    history = model.fit(
        inputs, epochs=training.epochs, steps_per_epoch=training.steps_per_epoch, callbacks=callbacks, verbose=0
    )
    return {name: float(values[-1]) for name, values in history.history.items() if values}


def _delete_backup(checkpoint_dir: str) -> None:
    """The chief's last step, after the export: until then a task lost (a peer, the ps) resumes at the end."""
    directory = checkpoint_layout.backup_dir(checkpoint_dir)
    if tf.io.gfile.exists(directory):
        tf.io.gfile.rmtree(directory)


class _Backup:
    """Custom-loop backups in BackupAndRestore's layout, so ``resume_point`` reads both."""

    def __init__(self, ctx: TaskContext, model: tf.keras.Model, optimizer: Any):
        self.ctx = ctx
        self.directory = checkpoint_layout.backup_dir(ctx.run_config.checkpoint_dir)
        self.saved_epoch = tf.Variable(-1, dtype=tf.int64)
        self.saved_batch = tf.Variable(-1, dtype=tf.int64)
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, ckpt_saved_epoch=self.saved_epoch, ckpt_saved_batch=self.saved_batch
        )
        self.manager = tf.train.CheckpointManager(self.checkpoint, posixpath.join(self.directory, "chief"), max_to_keep=1)
        asynchronous = ctx.run_config.async_backups
        self.writer = BackupWriter.of_manager(self.manager, asynchronous) if ctx.selection.is_lead else \
            BackupWriter.of_scratch(self.checkpoint, checkpoint_layout.backup_scratch_dir(ctx.run_config.checkpoint_dir, ctx.task_name),
                                    asynchronous)

    def restore(self) -> None:
        if self.manager.latest_checkpoint:
            self.checkpoint.read(self.manager.latest_checkpoint).expect_partial()

    def save(self, epoch: int, batch: int) -> None:
        self.saved_epoch.assign(epoch)
        self.saved_batch.assign(batch)
        self.writer.save()


def custom_loop(run: TrainingRun) -> dict[str, float]:
    """The user's ``train_step`` under ``strategy.run``; replicas' losses summed by ``strategy.reduce``."""
    ctx, strategy, model, global_batch = run.ctx, run.strategy, run.model, run.global_batch
    run_config, training = ctx.run_config, ctx.run_config.training
    optimizer, user_step = model.optimizer, ctx.user.train_step

    @tf.function
    def distributed_step(iterator: Any) -> tf.Tensor:
        losses = strategy.run(user_step, args=(model, optimizer, next(iterator)))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    if _is_pss(ctx):
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        per_worker = coordinator.create_per_worker_dataset(
            strategy.distribute_datasets_from_function(_dataset_fn(ctx, global_batch))
        )
        iterator = iter(per_worker)
        run_step: Callable[[], Any] = lambda: coordinator.schedule(distributed_step, args=(iterator,))
        wait_for_steps: Callable[[], None] = coordinator.join
        progress = run.progress(input_probe=None)  # the pipelines live on the workers
    else:
        distributed = strategy.experimental_distribute_dataset(data.finalize(ctx.user.make_dataset(None, global_batch)))
        iterator = iter(distributed)
        run_step = lambda: distributed_step(iterator)
        wait_for_steps = lambda: None
        progress = run.progress(input_probe=distributed)

    backup = _Backup(ctx, model, optimizer)
    backup.restore()
    done = [0, 0]  # (epoch, batch) of the last step done, what a preemption save records
    preemption = None if _is_pss(ctx) else CoordinatedSave(strategy, backup.manager, save_fn=lambda: backup.save(*done),
                                                           settle=backup.writer.settle)
    auto = run.auto_interval()
    every = auto.steps if auto is not None else run_config.backup_every_steps
    save_backup = backup.save if auto is None else lambda epoch, batch: auto.timed(lambda: backup.save(epoch, batch))
    pattern = checkpoint_layout.checkpoint_pattern(run_config.checkpoint_dir)
    start = run.resume or ResumePoint(0, 0, 0)
    loss: Any = None
    for epoch in range(start.epoch, training.epochs):
        progress.on_epoch_begin(epoch)
        for batch in range(start.step_in_epoch if epoch == start.epoch else 0, training.steps_per_epoch):
            progress.on_train_batch_begin(batch)
            loss = run_step()
            # Before the backup and a preemption save, as in fit: a step's curve point is on disk before
            # a save makes the step one a restart does not train again.
            progress.on_train_batch_end(batch, {"loss": loss})
            last = batch == training.steps_per_epoch - 1
            if isinstance(every, int) and not last and (epoch * training.steps_per_epoch + batch + 1) % every == 0:
                save_backup(epoch, batch)
            if preemption is not None:
                done[:] = epoch, batch
                preemption.after_step(epoch * training.steps_per_epoch + batch + 1)
        wait_for_steps()
        progress.on_epoch_end(epoch, {"loss": loss})
        save_backup(epoch, training.steps_per_epoch - 1)
        if auto is not None:
            decided = auto.decide(progress.timer.mean(), time.time())
            every = decided.steps
            ctx.reporter.lead(decided)
        weights = pattern.format(epoch=epoch + 1)
        lead_or_scratch(ctx, weights, model.save_weights)
        ctx.reporter.lead(events.CheckpointSaved(epoch=epoch, path=weights))
    backup.writer.settle()  # the export and the backup's deletion come after the last write
    final = scalar(fetched({"loss": loss}).get("loss"))
    return {"loss": final} if final is not None else {}
