"""A training module (the bundled digits) whose worker 1 blocks forever in its input pipeline, once.

Its pipeline passes every batch through a ``tf.py_function`` gate. On worker 1,
while ``marker`` does not exist, the gate lets ``block_after`` batches through,
then creates ``marker`` and never returns: the process lives, its gRPC server
answers, and its peers wait in the step's all-reduce, as with a stuck NFS read
or a deadlocked loader. A restarted attempt finds the marker and does not block.
With ``hold_seconds``, worker 1 does not block there but waits that long before each later batch: a first
attempt that still steps (a preempted task can save at a step) but slowly, so that a test's preemption lands
before it ends; the restarted attempt runs at full speed.
With ``block_in: step`` (under ``training.loop: custom``) the gate is in ``train_step`` instead, before the
step's all-reduce: worker 1 does ``block_after`` steps exactly, so every task stops at that step (the
pipeline's read-ahead and the entrypoint's input probe pass no gate then).
``step_delay`` (seconds) slows every batch of worker ``slow_worker`` (a straggler
whose input is slow); ``compute_delay`` slows the model's forward pass on worker
``slow_compute_worker`` (a straggler whose device is slow: same math, more time).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from launcher.examples import mnist

make_eval_dataset = mnist.make_eval_dataset


def _task() -> tuple[str, int]:
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    return task.get("type", ""), int(task.get("index", 0))


class Delay(tf.keras.layers.Layer):
    """Passes its input on after ``seconds``: the same math taking longer, as on a slower device."""

    def __init__(self, seconds: float, **kwargs: Any):
        super().__init__(**kwargs)
        self.seconds = seconds

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        slept = tf.py_function(lambda: time.sleep(self.seconds) or True, [], tf.bool)
        with tf.control_dependencies([slept]):
            return tf.identity(inputs)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "seconds": self.seconds}


def build_model(slow_compute_worker: int = -1, compute_delay: float = 0.0, **args: Any) -> tf.keras.Model:
    """The digits model; with ``compute_delay``, behind a ``Delay`` on every task (the same model everywhere,
    as MultiWorkerMirrored needs), which waits on worker ``slow_compute_worker`` only."""
    model = mnist.build_model(**args)
    if not compute_delay:
        return model
    delay = compute_delay if _task() == ("worker", slow_compute_worker) else 0.0
    slowed = tf.keras.Sequential([tf.keras.layers.Input(shape=(28, 28, 1)), Delay(delay), *model.layers])
    slowed.compile(optimizer=tf.keras.optimizers.Adam(), loss=model.loss, metrics=["accuracy"])
    return slowed


#: The gate ``train_step`` passes each step through (``block_in: step``); empty: none.
_step_gate: list[Callable[[], bool]] = []


def make_dataset(input_context: Any, global_batch_size: int, marker: str = "", block_after: int = 12,
                 block_in: str = "input", hold_seconds: float = 0.0, slow_worker: int = -1, step_delay: float = 0.0,
                 slow_compute_worker: int = -1, compute_delay: float = 0.0, **args: Any) -> tf.data.Dataset:
    dataset = mnist.make_dataset(input_context, global_batch_size, **args)
    blocks = bool(marker) and _task() == ("worker", 1) and not os.path.exists(marker)
    slow = _task() == ("worker", slow_worker)
    passed = [0]

    def gate() -> bool:
        passed[0] += 1
        if slow:
            time.sleep(step_delay)
        if blocks and passed[0] > block_after:
            with open(marker, "w") as file:
                file.write("blocked\n")
            if hold_seconds:
                time.sleep(hold_seconds)
                return True
            threading.Event().wait()  # forever
        return True

    def through_gate(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        opened = tf.py_function(gate, [], tf.bool)
        with tf.control_dependencies([opened]):
            return tf.identity(images), tf.identity(labels)

    if block_in == "step":
        _step_gate[:] = [gate]
        return dataset
    return dataset.map(through_gate)


def train_step(model: tf.keras.Model, optimizer: Any, batch: Any) -> tf.Tensor:
    """mnist's step, its batch passed through the step gate first (``block_in: step``; traced after the dataset
    is made)."""
    if _step_gate:
        opened = tf.py_function(_step_gate[0], [], tf.bool)
        with tf.control_dependencies([opened]):
            batch = tf.nest.map_structure(tf.identity, batch)
    return mnist.train_step(model, optimizer, batch)
