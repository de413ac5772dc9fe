"""The layout of a run's checkpoint directory, shared by every task (and readable without TF).

Contract (``dir`` = ``RunConfig.checkpoint_dir``, local path or ``gs://``/``s3://`` URL; the controller
reads it too, so this module imports no TensorFlow)::

    <dir>/backup/                      BackupAndRestore state (deleted after success)
    <dir>/checkpoints/ckpt-<epoch>     weights after every epoch, written by the chief only
    <dir>/model/model.keras            final model, exported by the chief (tf.keras.models.load_model)
    <dir>/tensorboard/{train,validation}/  TensorBoard summaries (the default log dir, ``RunConfig.tensorboard_dir``)
    <dir>/_tfcluster/<run_id>/DONE     completion marker, written by the chief after export
    <dir>/_tfcluster/<run_id>/EVALUATOR  written by the evaluator when it first starts in that launch
    <dir>/_tfcluster/<run_id>/STARTS   the lead's training starts in that launch, one unix time a line (auto interval)
    <dir>/_tfcluster/tmp/<task>/       scratch of non-chief tasks (removed by them)
    <dir>/_tfcluster/tmp-backup/<task>/  their backups' scratch (an asynchronous write outlives a save call)

Joins use '/' so URLs work unchanged.
"""

from __future__ import annotations

import posixpath

CHECKPOINT_PREFIX = "ckpt"
MODEL_FILE = "model.keras"
#: The default TensorBoard log dir, under the checkpoint dir.
TENSORBOARD_SUBDIR = "tensorboard"
#: Summary subdirectories of a log dir: the chief's training curves, the evaluator's validation curves.
TRAIN_SUMMARIES = "train"
VALIDATION_SUMMARIES = "validation"


def backup_dir(checkpoint_dir: str) -> str:
    return posixpath.join(checkpoint_dir, "backup")


def checkpoints_dir(checkpoint_dir: str) -> str:
    return posixpath.join(checkpoint_dir, "checkpoints")


def checkpoint_pattern(checkpoint_dir: str) -> str:
    """``ModelCheckpoint`` file pattern: one weights checkpoint per epoch."""
    return posixpath.join(checkpoints_dir(checkpoint_dir), CHECKPOINT_PREFIX + "-{epoch:04d}")


def checkpoint_epoch(path: str) -> int | None:
    """The epoch count of a ``checkpoint_pattern`` path (``.../ckpt-0003`` -> 3), or None for another name."""
    stem = posixpath.basename(path)
    prefix = CHECKPOINT_PREFIX + "-"
    if not stem.startswith(prefix) or not stem[len(prefix):].isdigit():
        return None
    return int(stem[len(prefix):])


def model_dir(checkpoint_dir: str) -> str:
    return posixpath.join(checkpoint_dir, "model")


def model_path(checkpoint_dir: str) -> str:
    return posixpath.join(model_dir(checkpoint_dir), MODEL_FILE)


def summaries_dir(log_dir: str, which: str) -> str:
    """``<log dir>/train`` or ``<log dir>/validation`` (``which``: ``TRAIN_SUMMARIES`` / ``VALIDATION_SUMMARIES``)."""
    return posixpath.join(log_dir, which)


def done_marker(checkpoint_dir: str, run_id: str) -> str:
    return posixpath.join(checkpoint_dir, "_tfcluster", run_id, "DONE")


def evaluator_marker(checkpoint_dir: str, run_id: str) -> str:
    return posixpath.join(checkpoint_dir, "_tfcluster", run_id, "EVALUATOR")


def starts_record(checkpoint_dir: str, run_id: str) -> str:
    return posixpath.join(checkpoint_dir, "_tfcluster", run_id, "STARTS")


def scratch_dir(checkpoint_dir: str, task_name: str) -> str:
    return posixpath.join(checkpoint_dir, "_tfcluster", "tmp", task_name)


def backup_scratch_dir(checkpoint_dir: str, task_name: str) -> str:
    """A non-lead task's backup scratch: apart from ``scratch_dir``, which other writes remove while it is written."""
    return posixpath.join(checkpoint_dir, "_tfcluster", "tmp-backup", task_name)


def is_object_store(checkpoint_dir: str) -> bool:
    """True for a URL (``gs://``, ``s3://``, ...): nothing to create or mount, tasks reach it themselves."""
    return "://" in checkpoint_dir
