"""Input-wait fraction measured for real: a pipeline that sleeps per batch vs a step that sleeps, both loops.

Run: python bench/bench_input_wait.py   (needs TensorFlow; prints each epoch's fraction)

An input-bound run should report fractions near 1 (and warn), a compute-bound
one near 0. This is the timing half of tests/unit/worker/test_worker_input.py,
kept out of the test suite because it depends on the machine's load.
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.tiny_user_code import train_step  # noqa: E402,F401  (this module is the user code: its custom loop step)
from launcher.protocol.events import MANUAL_TOKEN, EventReader  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.spec.models import Strategy, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import usercode  # noqa: E402
from launcher.worker.context import TaskContext  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402
from launcher.worker.selection import Duty, Selection  # noqa: E402
from launcher.worker.train import train  # noqa: E402

SLOW = 0.05  # seconds per batch (input) or per step (compute)


def _sleep(seconds: float) -> tf.Tensor:
    return tf.ensure_shape(tf.py_function(lambda: (time.sleep(seconds), 0.0)[1], [], tf.float32), [])


class Sleep(tf.keras.layers.Layer):
    def __init__(self, seconds: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return inputs + _sleep(self.seconds) if self.seconds else inputs


def build_model(input_sleep: float = 0.0, step_sleep: float = 0.0) -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.layers.Input(shape=(2,)), Sleep(step_sleep), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    return model


def make_dataset(input_context, global_batch_size: int, input_sleep: float = 0.0, step_sleep: float = 0.0) -> tf.data.Dataset:
    dataset = tf.data.Dataset.from_tensors((tf.ones([global_batch_size, 2]), tf.ones([global_batch_size, 1]))).repeat()
    return dataset.map(lambda x, y: (x + _sleep(input_sleep), y)) if input_sleep else dataset




def fractions(loop: TrainingLoop, **args: float) -> list[float]:
    training = TrainingSpec(module=__name__, loop=loop, epochs=2, steps_per_epoch=8, batch_size_per_replica=4, args=args)
    with TemporaryDirectory() as tmp:
        run_config = RunConfig(name="input", run_id="r1", strategy=Strategy.DEFAULT, training=training, checkpoint_dir=tmp)
        stream = io.StringIO()
        reporter = Reporter("input-chief-0", is_lead=True, stream=stream, token=MANUAL_TOKEN)
        selection = Selection(Duty.TRAIN, Strategy.DEFAULT, None, 0, is_lead=True)
        train(TaskContext(reporter.task, run_config, {}, selection, usercode.load(training), reporter))
    events = [EventReader(MANUAL_TOKEN).parse(line) for line in stream.getvalue().splitlines()]
    return [e.input_wait_fraction for e in events if e and e.event == "epoch"]


def main() -> None:
    sys.modules.setdefault(__name__, sys.modules["__main__"])
    print("\nInput-wait fraction per epoch (input-bound should be near 1, compute-bound near 0)")
    for loop in TrainingLoop:
        print(f"{loop.value:>6}  input-bound {fractions(loop, input_sleep=SLOW)}  compute-bound {fractions(loop, step_sleep=SLOW)}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
