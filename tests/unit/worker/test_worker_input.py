"""The per-epoch input-wait fraction, measured by the real entrypoint training loops in one process.

This module is also the user code of those runs: ``make_dataset`` sleeps
``input_sleep`` seconds per batch (a pipeline that cannot keep up), the model
sleeps ``step_sleep`` seconds per step (a compute-bound step).
"""

from __future__ import annotations

import io
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

tf = pytest.importorskip("tensorflow")

from launcher.protocol.events import parse_event  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.spec.models import Strategy, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import usercode  # noqa: E402
from launcher.worker.callbacks import ProgressCallback  # noqa: E402
from launcher.worker.context import TaskContext  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402
from launcher.worker.selection import Action, Selection  # noqa: E402
from launcher.worker.train import train  # noqa: E402

pytestmark = pytest.mark.tf

EPOCHS, STEPS, BATCH = 2, 8, 4
SLOW = 0.05  # seconds


def _sleep(seconds: float) -> tf.Tensor:
    """A graph-side pause of ``seconds`` that returns 0.0 (add it to a tensor to order it)."""
    return tf.ensure_shape(tf.py_function(lambda: (time.sleep(seconds), 0.0)[1], [], tf.float32), [])


class Sleep(tf.keras.layers.Layer):
    def __init__(self, seconds: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return inputs + _sleep(self.seconds) if self.seconds else inputs

    def get_config(self) -> dict:
        return {**super().get_config(), "seconds": self.seconds}


def build_model(input_sleep: float = 0.0, step_sleep: float = 0.0) -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.layers.Input(shape=(2,)), Sleep(step_sleep), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    return model


def make_dataset(input_context, global_batch_size: int, input_sleep: float = 0.0, step_sleep: float = 0.0) -> tf.data.Dataset:
    dataset = tf.data.Dataset.from_tensors((tf.ones([global_batch_size, 2]), tf.ones([global_batch_size, 1]))).repeat()
    if input_sleep:
        dataset = dataset.map(lambda x, y: (x + _sleep(input_sleep), y))
    return dataset


def train_step(model: tf.keras.Model, optimizer, batch) -> tf.Tensor:
    features, labels = batch
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(tf.keras.losses.mean_squared_error(labels, model(features, training=True)))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True))
    return loss


def run_single_task(tmp_path: Path, loop: TrainingLoop, **args: float) -> list[dict]:
    """Train this module in-process with the default strategy; the ``epoch`` events."""
    training = TrainingSpec(module=__name__, loop=loop, epochs=EPOCHS, steps_per_epoch=STEPS, batch_size_per_replica=BATCH, args=args)
    run_config = RunConfig(name="input", run_id="r1", strategy=Strategy.DEFAULT, training=training, checkpoint_dir=str(tmp_path))
    stream = io.StringIO()
    reporter = Reporter("input-chief-0", is_lead=True, stream=stream)
    selection = Selection(Action.TRAIN, Strategy.DEFAULT, None, 0, is_lead=True)
    train(TaskContext(reporter.task, run_config, {}, selection, usercode.load(training), reporter))
    events = [parse_event(line) for line in stream.getvalue().splitlines()]
    return [e for e in events if e and e.event == "epoch"]


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_a_pipeline_slower_than_the_step_is_reported_input_bound(tmp_path: Path, loop: TrainingLoop, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        epochs = run_single_task(tmp_path, loop, input_sleep=SLOW)
    fractions = [e.input_wait_fraction for e in epochs]
    assert len(fractions) == EPOCHS and all(f > 0.7 for f in fractions), fractions
    warnings = [r.getMessage() for r in caplog.records if "input-bound" in r.getMessage()]
    assert len(warnings) == EPOCHS, caplog.text


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_a_pipeline_faster_than_the_step_is_not(tmp_path: Path, loop: TrainingLoop, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        epochs = run_single_task(tmp_path, loop, step_sleep=SLOW)
    fractions = [e.input_wait_fraction for e in epochs]
    assert len(fractions) == EPOCHS and all(0 <= f < 0.3 for f in fractions), fractions
    assert "input-bound" not in caplog.text


def test_without_a_probe_the_fraction_is_null_and_nothing_is_claimed(caplog) -> None:
    """The PSS coordinator cannot iterate the workers' pipelines: the event says null."""
    stream = io.StringIO()
    progress = ProgressCallback(Reporter("t", is_lead=True, stream=stream), steps_per_epoch=2, epochs=1, every=1, input_probe=None)
    progress.on_epoch_begin(0)
    for batch in range(2):
        progress.on_train_batch_begin(batch)
        progress.on_train_batch_end(batch, {"loss": 1.0})
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        progress.on_epoch_end(0, {"loss": 1.0})
    [epoch] = [e for e in map(parse_event, stream.getvalue().splitlines()) if e and e.event == "epoch"]
    assert epoch.input_wait_fraction is None and "input-bound" not in caplog.text
