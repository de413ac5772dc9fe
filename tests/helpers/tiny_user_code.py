"""A tiny user module for the entrypoint's training loops in one process: one Dense layer on constant data.

``training.module: helpers.tiny_user_code``; the loops' measures, not the model's, are what such tests look at.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402


def build_model() -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.layers.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    return model


def make_dataset(input_context, global_batch_size: int) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensors((tf.ones([global_batch_size, 2]), tf.ones([global_batch_size, 1]))).repeat()


def train_step(model: tf.keras.Model, optimizer, batch) -> tf.Tensor:
    features, labels = batch
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.keras.losses.mean_squared_error(labels, model(features, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True))
    return loss
