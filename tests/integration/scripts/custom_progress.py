"""A custom training loop that reports its progress to tfcluster (report_step, report_epoch, report_finished)."""
import numpy as np
import tensorflow as tf

from launcher.progress import report_epoch, report_finished, report_step

EPOCHS, STEPS, BATCH = 2, 8, 32
x = np.random.default_rng(0).normal(size=(STEPS * BATCH, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
w = tf.Variable(tf.zeros((4, 1)))
optimizer = tf.keras.optimizers.SGD(0.1)
for epoch in range(EPOCHS):
    for batch in range(STEPS):
        xb, yb = x[batch * BATCH:(batch + 1) * BATCH], y[batch * BATCH:(batch + 1) * BATCH]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((xb @ w - yb) ** 2)
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        step = epoch * STEPS + batch + 1
        if step % 4 == 0:
            report_step(step, loss, epoch=epoch, total_steps=EPOCHS * STEPS)
    report_epoch(epoch, loss=loss)
report_finished(loss=loss)
