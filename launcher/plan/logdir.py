"""Where a run's TensorBoard summaries go: resolved once here, handed to tasks by the planner.

Contract: ``log_dir(spec, checkpoint_dir)`` is pure. ``tensorboard.enabled:
false`` gives None (no summaries, no ``TFCLUSTER_TENSORBOARD_DIR``); no
``tensorboard.dir`` gives ``<checkpoint dir>/tensorboard``; a URL or an
absolute path is kept; a relative path is relative to the checkpoint dir
(so in containers it stays on the shared checkpoint volume). Where a log
dir may be is ``launcher.plan.storage``'s rule.
"""

from __future__ import annotations

import posixpath

from launcher.protocol.checkpoint_layout import TENSORBOARD_SUBDIR, is_object_store
from launcher.spec.models import ClusterSpec


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
