"""A user program's events reach the controller beside Keras' own progress bar (``launcher.progress``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from launcher.backends.lines import iter_lines
from launcher.protocol import env
from launcher.protocol.events import EventReader, new_token

pytestmark = pytest.mark.tf  # runs TensorFlow: not in the fast lane

#: ``fit`` with its default progress bar (verbose=1), which ends its line only at an epoch's end: an event written
#: between two of its updates follows the bar on the same line (the bar of an epoch's first batch always shows).
PROGRAM = """
import numpy as np
import tensorflow as tf
from launcher.progress import ProgressCallback
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x, (x.sum(axis=1) > 0).astype("float32"), epochs=2, batch_size=8, callbacks=[ProgressCallback(every=2)], verbose=1)
"""


def test_every_step_is_read_though_the_progress_bar_shares_its_line() -> None:
    token = new_token()
    ran = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, timeout=300, env={
        **os.environ, env.LEGACY_KERAS: "1", "TF_CPP_MIN_LOG_LEVEL": "3", env.EVENT_TOKEN: token,
        env.TASK_NAME: "bar-worker-0", env.IS_CHIEF: "1"})
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    lines = list(iter_lines([ran.stdout]))  # split as every backend splits a task's output: at newlines
    reader = EventReader(token)
    steps = [(line, event.step) for line in lines if (event := reader.parse(line)) is not None and event.event == "step"]
    assert [step for _, step in steps] == [1, 2, 4, 6, 8, 10, 12, 14, 16]  # the run's first step, then every 2
    assert any(" - loss: " in line.partition("\rTFCLUSTER_EVENT/")[0] for line, _ in steps), "no event after a bar"
