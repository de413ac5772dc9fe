"""Input-pipeline helpers: explicit auto-shard policy and prefetching.

Contract: ``finalize(dataset)`` is applied by the entrypoint to every
training dataset: it keeps an auto-shard policy the user set (e.g. with
``shard_by_files``), sets ``DATA`` otherwise (right for in-memory data), and
prefetches with AUTOTUNE. Users reading files call
``shard_by_files(dataset, num_files, num_workers)``: ``FILE`` when every
worker gets at least one file, ``DATA`` otherwise.
``seconds_per_batch(dataset, batches)`` times the input side alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

Policy: Any = tf.data.experimental.AutoShardPolicy


def shard_policy(num_files: int | None, num_workers: int) -> Any:
    """FILE when there are at least as many files as workers, else DATA."""
    return Policy.FILE if num_files is not None and num_files >= max(num_workers, 1) else Policy.DATA


def with_shard_policy(dataset: tf.data.Dataset, policy: Any) -> tf.data.Dataset:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return dataset.with_options(options)


def shard_by_files(dataset: tf.data.Dataset, num_files: int, num_workers: int) -> tf.data.Dataset:
    return with_shard_policy(dataset, shard_policy(num_files, num_workers))


def finalize(dataset: tf.data.Dataset) -> tf.data.Dataset:
    if dataset.options().experimental_distribute.auto_shard_policy == Policy.AUTO:
        dataset = with_shard_policy(dataset, Policy.DATA)
    return dataset.prefetch(tf.data.AUTOTUNE)


def seconds_per_batch(dataset: Iterable[Any], batches: int) -> float:
    """Mean wall seconds per ``next()`` on a fresh iterator of ``dataset`` (tf.data or distributed).

    The first batch is left out (pipeline start, shuffle-buffer fill); the
    others are pulled back to back, so the result is what the pipeline needs
    per batch when nothing else waits on it. A fresh iterator is used because
    an idle one fills its prefetch buffers and would answer instantly.
    """
    iterator = iter(dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return (time.perf_counter() - start) / batches
