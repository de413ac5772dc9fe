"""A launch's markers: the chief's DONE, the evaluator's first start, the lead's training starts; the PSS servers.

Contract: ``mark_done`` writes ``checkpoint_layout.done_marker`` (via ``tf.io.gfile``, so
``gs://`` works); ``first_evaluator_start`` writes ``checkpoint_layout.evaluator_marker``
and tells whether it was the first to; ``record_start`` adds a time to ``checkpoint_layout.starts_record``
(rewritten whole: an object store appends nothing), ``starts`` reads them back (every start after the first
followed a failure or a preemption of the launch; a line it cannot read is left out); ``serve_until_done`` starts this task's
``tf.distribute.Server`` and returns once the marker of this run exists,
polling every ``poll`` seconds (``server.join()`` would block forever).
"""

from __future__ import annotations

import logging
import posixpath
import time
from typing import Any

import tensorflow as tf

from launcher.protocol import checkpoint_layout
from launcher.worker.preemption import exit_on_notice
from launcher.worker.selection import Selection

POLL_S = 1.0
log = logging.getLogger("launcher.worker")


def _mark(marker: str) -> str:
    tf.io.gfile.makedirs(posixpath.dirname(marker))
    with tf.io.gfile.GFile(marker, "w") as handle:
        handle.write(f"{time.time():.3f}\n")
    return marker


def mark_done(checkpoint_dir: str, run_id: str) -> str:
    return _mark(checkpoint_layout.done_marker(checkpoint_dir, run_id))


def first_evaluator_start(checkpoint_dir: str, run_id: str) -> bool:
    """True when no evaluator of launch ``run_id`` started before (a restarted one gets False)."""
    marker = checkpoint_layout.evaluator_marker(checkpoint_dir, run_id)
    if tf.io.gfile.exists(marker):
        return False
    _mark(marker)
    return True


def starts(checkpoint_dir: str, run_id: str) -> list[float]:
    """The lead's training starts of launch ``run_id`` (unix seconds, in order); [] before the first."""
    record = checkpoint_layout.starts_record(checkpoint_dir, run_id)
    if not tf.io.gfile.exists(record):
        return []
    with tf.io.gfile.GFile(record, "r") as handle:
        lines = handle.read().split()
    times = []
    for line in lines:
        try:
            times.append(float(line))
        except ValueError:
            continue
    return times


def record_start(checkpoint_dir: str, run_id: str, now: float) -> None:
    """Adds ``now`` (unix seconds) to the lead's training starts of launch ``run_id``."""
    record = checkpoint_layout.starts_record(checkpoint_dir, run_id)
    before = starts(checkpoint_dir, run_id)
    tf.io.gfile.makedirs(posixpath.dirname(record))
    with tf.io.gfile.GFile(record, "w") as handle:
        handle.write("".join(f"{t:.3f}\n" for t in [*before, now]))


def is_done(checkpoint_dir: str, run_id: str) -> bool:
    return tf.io.gfile.exists(checkpoint_layout.done_marker(checkpoint_dir, run_id))


def serve_until_done(selection: Selection, tf_config: dict[str, Any], checkpoint_dir: str, run_id: str, poll: float = POLL_S) -> None:
    cluster = tf.train.ClusterSpec(tf_config["cluster"])
    role = selection.role.value if selection.role else "worker"
    server = tf.distribute.Server(cluster, job_name=role, task_index=selection.index, protocol="grpc", start=True)
    exit_on_notice()  # a server holds no state of its own: a notice ends it at once
    log.info("%s %d serving at %s until %s", role, selection.index, server.target, checkpoint_layout.done_marker(checkpoint_dir, run_id))
    while not is_done(checkpoint_dir, run_id):
        time.sleep(poll)
