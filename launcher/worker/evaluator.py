"""The evaluator sidecar: evaluate each new chief checkpoint until the run is done.

Contract: ``evaluate(ctx)`` polls ``<checkpoint_dir>/checkpoints`` every ``poll`` seconds, evaluates
the newest checkpoint when it changed (skipping those written faster than evaluated), emits an
``evaluation`` event and writes validation summaries at its step; once the run's DONE marker exists
it evaluates the latest checkpoint and returns, so the final one is always evaluated. It runs
outside the training cluster with the default strategy. The first evaluator of a launch skips an
earlier launch's checkpoints past the resumed step. Users' guide:
docs/user_code.md (Evaluator).
"""

from __future__ import annotations

import time

import tensorflow as tf

from launcher.protocol import events, paths
from launcher.worker import lifecycle
from launcher.worker.context import TaskContext
from launcher.worker.errors import ConfigError
from launcher.worker.restore import resume_point
from launcher.worker.summaries import ValidationSummaries

POLL_S = 2.0


def evaluate(ctx: TaskContext, poll: float = POLL_S) -> None:
    run_config = ctx.run_config
    if not ctx.user.has_eval_dataset:
        raise ConfigError(f"training.module {run_config.training.module!r} lacks make_eval_dataset, needed by the evaluator")
    ctx.reporter.emit(events.Started(strategy="default", num_replicas_in_sync=1, role="evaluator", index=ctx.selection.index))
    model = ctx.user.build_model()
    dataset = ctx.user.make_eval_dataset(run_config.training.batch_size_per_replica)
    directory = paths.checkpoints_dir(run_config.checkpoint_dir)
    steps_per_epoch = run_config.training.steps_per_epoch
    evaluated: str | None = None
    resume_step: int | None = None
    if lifecycle.first_evaluator_start(run_config.checkpoint_dir, run_config.run_id):
        resume = resume_point(paths.backup_dir(run_config.checkpoint_dir), steps_per_epoch,
                              run_config.backup_every_steps is not None)
        resume_step = 0 if resume is None else resume.step
        earlier = tf.train.latest_checkpoint(directory)
        finished = lifecycle.is_done(run_config.checkpoint_dir, run_config.run_id)  # then the latest is this launch's
        if earlier is not None and not finished and (paths.checkpoint_epoch(earlier) or 0) * steps_per_epoch > resume_step:
            evaluated = earlier
    summaries = ValidationSummaries.open(run_config, resume_step)
    metrics: dict[str, float] = {}
    while True:
        done = lifecycle.is_done(run_config.checkpoint_dir, run_config.run_id)  # before looking: then the last one is seen
        latest = tf.train.latest_checkpoint(directory)
        if latest and latest != evaluated:
            model.load_weights(latest).expect_partial()
            metrics = {k: float(v) for k, v in model.evaluate(dataset, verbose=0, return_dict=True).items()}
            ctx.reporter.emit(events.Evaluation(checkpoint=latest, metrics=metrics))
            epoch = paths.checkpoint_epoch(latest)
            if summaries is not None and epoch is not None:
                summaries.write(epoch * steps_per_epoch, metrics)
            evaluated = latest
        if done:
            break
        time.sleep(poll)
    if summaries is not None:
        summaries.close()
    ctx.reporter.emit(events.Finished(metrics=metrics))
