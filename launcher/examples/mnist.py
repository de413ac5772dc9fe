"""The course's MNIST CNN as a ``training.module`` for the shared entrypoint.

Data: real MNIST when a local ``mnist.npz`` exists (``$TFCLUSTER_MNIST_NPZ``
or ``~/.keras/datasets/mnist.npz``), or when ``download: true`` is set and
the network allows (``tf.keras.datasets.mnist.load_data``, cached in
``~/.keras/datasets``); otherwise the deterministic synthetic digits of
``launcher.examples.digits`` with a held-out test split. Nothing is
downloaded unless asked. ``training.args`` accepted: ``train_examples``,
``test_examples`` (synthetic sizes), ``seed``, ``learning_rate``, ``download``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from launcher.examples.digits import synthetic_digits

MNIST_NPZ_ENV = "TFCLUSTER_MNIST_NPZ"
SHUFFLE_BUFFER = 10_000


def mnist_file() -> Path | None:
    candidates = [os.environ.get(MNIST_NPZ_ENV), str(Path.home() / ".keras" / "datasets" / "mnist.npz")]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def load_split(train: bool, train_examples: int = 8192, test_examples: int = 2048, seed: int = 0,
               download: bool = False):
    """(images float32 [n,28,28,1] in [0,1], labels int64 [n]) of the train or test split."""
    path = mnist_file()
    if path is not None:
        with np.load(path) as data:
            images, labels = (data["x_train"], data["y_train"]) if train else (data["x_test"], data["y_test"])
    elif download:
        (x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
        images, labels = (x_train, y_train) if train else (x_test, y_test)
    else:
        # Different seeds keep the test split disjoint from the training one.
        images, labels = synthetic_digits(train_examples if train else test_examples, seed * 2 + (0 if train else 1))
    return (images[..., np.newaxis] / np.float32(255)).astype(np.float32), labels.astype(np.int64)


def build_model(learning_rate: float = 0.001, **_: object) -> tf.keras.Model:
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def make_dataset(
    input_context: tf.distribute.InputContext | None,
    global_batch_size: int,
    train_examples: int = 8192,
    test_examples: int = 2048,
    seed: int = 0,
    download: bool = False,
    **_: object,
) -> tf.data.Dataset:
    images, labels = load_split(True, train_examples, test_examples, seed, download)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    batch_size = global_batch_size
    if input_context is not None:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    return dataset.shuffle(SHUFFLE_BUFFER, seed=seed).repeat().batch(batch_size)


def make_eval_dataset(
    global_batch_size: int, train_examples: int = 8192, test_examples: int = 2048, seed: int = 0,
    download: bool = False, **_: object
) -> tf.data.Dataset:
    images, labels = load_split(False, train_examples, test_examples, seed, download)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(global_batch_size)


def train_step(model: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer, batch) -> tf.Tensor:
    """One replica's step for ``training.loop: custom``; returns its share of the global mean loss."""
    images, labels = batch
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        per_example = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        loss = tf.nn.compute_average_loss(per_example)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return loss
