"""Where a run's TensorBoard summaries go: resolved once here, handed to tasks by the planner.

Contract: ``log_dir(spec, checkpoint_dir)`` is pure. ``tensorboard.enabled:
false`` gives None (no summaries, no ``TFCLUSTER_TENSORBOARD_DIR``); no
``tensorboard.dir`` gives ``<checkpoint dir>/tensorboard``; a URL or an
absolute path is kept; a relative path is relative to the checkpoint dir
(so in containers it stays on the shared checkpoint volume).
``outside_volume_problems(spec, mount)`` is the rule of the container
backends: an absolute local log dir must lie in the checkpoint volume
mounted at ``mount``, the only place every task can write and the
TensorBoard server can read.
"""

from __future__ import annotations

import posixpath

from launcher.protocol.paths import TENSORBOARD_SUBDIR, is_object_store
from launcher.spec.models import ClusterSpec
from launcher.spec.paths import is_within
from launcher.spec.problems import Problem


def log_dir(spec: ClusterSpec, checkpoint_dir: str) -> str | None:
    tensorboard = spec.tensorboard
    if not tensorboard.enabled:
        return None
    configured = tensorboard.dir
    if configured is None:
        return posixpath.join(checkpoint_dir, TENSORBOARD_SUBDIR)
    if is_object_store(configured) or posixpath.isabs(configured):
        return configured
    return posixpath.join(checkpoint_dir, configured)


def outside_volume_problems(spec: ClusterSpec, mount: str) -> list[Problem]:
    """A problem at ``tensorboard.dir`` if it is an absolute local path outside ``mount``."""
    configured = spec.tensorboard.dir
    if configured is None or is_object_store(configured) or not posixpath.isabs(configured):
        return []
    if is_within(configured, mount):
        return []
    return [Problem(
        "tensorboard.dir",
        f"must lie in the checkpoint volume at {mount} (or be relative to it, or a gs:// or s3:// URL); "
        f"got {configured!r}",
    )]
