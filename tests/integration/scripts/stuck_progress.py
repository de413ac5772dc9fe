"""A MultiWorkerMirrored Keras script with ProgressCallback and BackupAndRestore, launched by `tfcluster run`.

Every batch passes a ``tf.py_function`` gate. ``--block``: on worker 1, while
``<checkpoint dir>/blocked`` does not exist, the gate blocks forever after 12
batches (creating the file): alive but stuck, once. ``--first-delay S``: the
first batch of each process waits S seconds (a slow first step);
``--save-delay S``: every epoch's save takes S seconds longer (a slow save);
``--working-save S``: every epoch's save works S seconds longer, one call
deeper every half second (its stack changes as a save walking its objects does).
"""
import argparse
import json
import os
import threading
import time

import numpy as np
import tensorflow as tf

from launcher.progress import ProgressCallback

parser = argparse.ArgumentParser()
parser.add_argument("--block", action="store_true")
parser.add_argument("--first-delay", type=float, default=0.0)
parser.add_argument("--save-delay", type=float, default=0.0)
parser.add_argument("--working-save", type=float, default=0.0)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]
marker = os.path.join(os.environ["TFCLUSTER_CHECKPOINT_DIR"], "blocked")
blocks = args.block and (task["type"], task["index"]) == ("worker", 1) and not os.path.exists(marker)
passed = [0]


def gate():
    passed[0] += 1
    if passed[0] == 1 and args.first_delay:
        time.sleep(args.first_delay)
    if blocks and passed[0] > 12:
        with open(marker, "w") as file:
            file.write("blocked\n")
        threading.Event().wait()  # forever
    return True


def through_gate(x, y):
    opened = tf.py_function(gate, [], tf.bool)
    with tf.control_dependencies([opened]):
        return tf.identity(x), tf.identity(y)


def save_part(depth, until):
    if depth:
        return save_part(depth - 1, until)
    time.sleep(max(0.0, until - time.monotonic()))


class SlowSave(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(args.save_delay)
        start = time.monotonic()
        for part in range(int(args.working_save * 2)):
            save_part(part, start + 0.5 * (part + 1))


rng = np.random.default_rng(0)
x = rng.normal(size=(1024, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16 * strategy.num_replicas_in_sync).map(through_gate)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy")
callbacks = [ProgressCallback(every=2),
             tf.keras.callbacks.BackupAndRestore(os.environ["TFCLUSTER_BACKUP_DIR"], save_freq=5), SlowSave()]
model.fit(dataset, epochs=args.epochs, steps_per_epoch=10, callbacks=callbacks, verbose=0)
