"""The compute probe: a task's own time per batch for a step's math, apart from its input and its peers.

Contract: ``ComputeProbe(model, strategy).seconds_per_batch(dataset, batches)``
takes one batch from a fresh iterator of ``dataset`` (the task's distributed
input, as training sees it), then runs on it, ``batches`` times back to back,
the model's forward pass and the gradients of its summed outputs with respect
to its trainable variables, in one ``tf.function`` under ``strategy.run``,
and returns the mean wall seconds of one run. The first run (tracing) is left
out. The model runs in inference mode and nothing is applied: no variable
is written, so no collective runs and no peer is waited for (under
MultiWorkerMirrored the variables are read from this task's replicas). What it
measures is what this task's devices need per batch for the forward and
backward pass of a step, the part a slow device or a crowded host makes slow;
the optimizer update and the loss function's own cost are left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import tensorflow as tf


class ComputeProbe:
    """Times the forward and backward pass of ``model`` on this task alone (see the module contract)."""

    def __init__(self, model: tf.keras.Model, strategy: tf.distribute.Strategy):
        self.model = model
        self.strategy = strategy
        self._run = tf.function(self._forward_backward)

    def _forward_backward(self, batch: Any) -> Any:
        def replica(batch: Any) -> tf.Tensor:
            inputs = batch[0] if isinstance(batch, tuple | list) else batch
            with tf.GradientTape() as tape:
                outputs = self.model(inputs, training=False)
                total = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in tf.nest.flatten(outputs)])
            gradients = [g for g in tape.gradient(total, self.model.trainable_variables) if g is not None]
            return tf.add_n([tf.reduce_sum(g) for g in gradients]) if gradients else total

        return self.strategy.run(replica, args=(batch,))

    def _once(self, batch: Any) -> None:
        for value in self.strategy.experimental_local_results(self._run(batch)):
            value.numpy()  # waits for the work, on every local replica

    def seconds_per_batch(self, dataset: Iterable[Any], batches: int) -> float:
        batch = next(iter(dataset))
        self._once(batch)  # traces
        start = time.perf_counter()
        for _ in range(batches):
            self._once(batch)
        return (time.perf_counter() - start) / batches
