"""Where ``BackupAndRestore`` will resume, read from its backup before ``fit`` starts.

Contract: ``resume_point(backup_dir, steps_per_epoch, step_granular)`` returns
``None`` when there is no backup, else ``ResumePoint(epoch, step_in_epoch,
step)``: the 0-based epoch and batch fit continues at and the global number
of steps already done. It mirrors tf_keras ``WorkerTrainingState``
(``tf_keras/src/distribute/worker_training_state.py``): the backup lives in
``<backup_dir>/chief`` and holds the variables ``ckpt_saved_epoch`` and
``ckpt_saved_batch`` (-1 = unused); batch-level saves resume after the saved
batch, epoch-level saves at the next epoch.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import tensorflow as tf

UNUSED = -1
EPOCH_KEY = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"
BATCH_KEY = "ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"


@dataclass(frozen=True)
class ResumePoint:
    epoch: int
    step_in_epoch: int
    step: int


def resume_point(backup_dir: str, steps_per_epoch: int, step_granular: bool) -> ResumePoint | None:
    checkpoint = tf.train.latest_checkpoint(posixpath.join(backup_dir, "chief"))
    if checkpoint is None:
        return None
    reader = tf.train.load_checkpoint(checkpoint)
    epoch, batch = int(reader.get_tensor(EPOCH_KEY)), int(reader.get_tensor(BATCH_KEY))
    if epoch == UNUSED:
        return None
    if step_granular and batch != UNUSED:
        if batch == steps_per_epoch - 1:
            return ResumePoint(epoch + 1, 0, (epoch + 1) * steps_per_epoch)
        return ResumePoint(epoch, batch + 1, epoch * steps_per_epoch + batch + 1)
    return ResumePoint(epoch + 1, 0, (epoch + 1) * steps_per_epoch)
