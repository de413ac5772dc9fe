"""Writing files every MWMS task must write but only the lead task (the chief, or worker 0 without one) may keep.

Contract: ``lead_or_scratch(ctx, path, write)`` calls ``write(target)`` with
the real ``path`` on the lead task and with a per-task scratch path elsewhere,
then removes the scratch copy. Under MultiWorkerMirroredStrategy every task
must take part in a save (reading synced variables is a collective), so
the other tasks cannot simply skip it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

import tensorflow as tf

from launcher.protocol import checkpoint_layout
from launcher.worker.context import TaskContext


def lead_or_scratch(ctx: TaskContext, path: str, write: Callable[[str], object]) -> str | None:
    """Writes ``path`` (chief) or a scratch copy (others); returns the kept path or None."""
    if ctx.selection.is_lead:
        tf.io.gfile.makedirs(posixpath.dirname(path))
        write(path)
        return path
    scratch = checkpoint_layout.scratch_dir(ctx.run_config.checkpoint_dir, ctx.task_name)
    target = posixpath.join(scratch, posixpath.basename(path))
    tf.io.gfile.makedirs(scratch)
    try:
        write(target)
    finally:
        if tf.io.gfile.exists(scratch):
            tf.io.gfile.rmtree(scratch)
    return None
