"""Asynchronous backups and ``backup_every_steps: auto``, with real TensorFlow checkpoints in one process.

The guarantee against a task killed mid-write is tested with a real kill in
``tests/integration/test_local_tf.py`` (the chief's write stopped before
TensorFlow records it); here: what a write leaves once settled, and the
interval ``auto`` chooses and reports through the real training loops.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

tf = require_module("tensorflow")

from launcher.protocol import checkpoint_layout  # noqa: E402
from launcher.protocol.events import MANUAL_TOKEN, EventReader  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.spec.models import Strategy, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import usercode  # noqa: E402
from launcher.worker.backups import Backups, BackupWriter  # noqa: E402
from launcher.worker.context import TaskContext  # noqa: E402
from launcher.worker.interval import AutoInterval, steps_between  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402
from launcher.worker.restore import ResumePoint, resume_point  # noqa: E402
from launcher.worker.selection import Duty, Selection  # noqa: E402
from launcher.worker.train import train  # noqa: E402

pytestmark = pytest.mark.tf

EPOCHS, STEPS, BATCH = 3, 6, 4


def test_the_interval_keeps_backups_within_their_share_of_the_training_time() -> None:
    assert steps_between(save_seconds=0.01, step_seconds=0.1) == 5  # 0.01 / (5 x 0.1) = 2 %
    assert steps_between(save_seconds=0.0101, step_seconds=0.1) == 6  # never above the share
    assert steps_between(save_seconds=0.0, step_seconds=0.1) == 1  # free: every step
    assert steps_between(save_seconds=5.0, step_seconds=0.001) == 100_000  # bounded
    assert steps_between(save_seconds=0.01, step_seconds=0.0) == 100_000


def test_the_first_two_saves_are_left_out_once_others_are_measured_and_nothing_measured_keeps_the_interval() -> None:
    auto = AutoInterval(tf.distribute.get_strategy(), initial=50)
    nothing = auto.decide(0.1, now=1000.0)
    assert (nothing.steps, nothing.reason) == (50, "no backup measured yet")
    auto.saved(0.5)  # sets the writer up
    auto.saved(0.07)  # traces its copy to host memory
    auto.saved(0.01)
    auto.saved(0.01)
    decided = auto.decide(0.1, now=1000.0)
    assert (decided.steps, decided.save_seconds, decided.step_seconds) == (5, 0.01, 0.1) and auto.steps == 5
    assert decided.mtbf_seconds is None and decided.reason and "no failure yet" in decided.reason


def test_the_decision_counts_the_runs_restarts_since_its_first_start_and_says_so() -> None:
    starts = [1000.0]
    auto = AutoInterval(tf.distribute.get_strategy(), initial=50, stated_mtbf=86400.0, starts=lambda: starts)
    for _ in range(3):
        auto.saved(0.8)
    stated = auto.decide(0.5, now=1600.0)
    assert (stated.steps, stated.mtbf_seconds, stated.reason) == (
        round((2 * 0.8 * 86400) ** 0.5 / 0.5), 86400.0, "save 0.8 s, MTBF 24 h (stated)")
    starts += [1900.0, 2800.0]  # two restarts: 2 failures in the 2400 s since the first start
    observed = auto.decide(0.5, now=3400.0)
    assert (observed.steps, observed.mtbf_seconds) == (88, 1200.0) and auto.steps == 88
    assert observed.reason == "save 0.8 s, MTBF 20 min (2 failures in 40 min)"


def test_an_asynchronous_write_is_recorded_once_it_landed_and_a_scratch_copy_is_removed(tmp_path: Path) -> None:
    variable = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "chief"), max_to_keep=1)
    kept = BackupWriter.of_manager(manager, asynchronous=True)
    kept.save()
    variable.assign(2.0)  # after the save returned: the copy it writes was taken before
    kept.settle()
    assert manager.latest_checkpoint and manager.latest_checkpoint.endswith("ckpt-1")
    restored = tf.Variable(0.0)
    tf.train.Checkpoint(v=restored).read(manager.latest_checkpoint).assert_existing_objects_matched()
    assert restored.numpy() == 1.0
    scratch = BackupWriter.of_scratch(checkpoint, str(tmp_path / "scratch"), asynchronous=True)
    scratch.save()
    scratch.settle()
    assert not (tmp_path / "scratch").exists()


def trained_model() -> Any:
    model = tf.keras.Sequential([tf.keras.layers.Input(shape=(3,)), tf.keras.layers.Dense(4), tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(tf.ones([8, 3]), tf.ones([8, 1]), epochs=1, verbose=0)  # the optimizer's slots exist from here
    return model


def test_an_asynchronous_backup_is_one_traced_write_that_restores_the_values_of_its_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorflow.python.checkpoint.checkpoint import TrackableSaver

    walks = []  # the Python walks of the object graph: once to trace, instead of once per save
    gather = TrackableSaver._gather_serialized_tensors
    monkeypatch.setattr(TrackableSaver, "_gather_serialized_tensors", lambda *a, **k: walks.append(1) or gather(*a, **k))
    model = trained_model()
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "chief"), max_to_keep=1)
    writer = BackupWriter.of_manager(manager, asynchronous=True)
    for _ in range(5):
        model.fit(tf.ones([8, 3]), tf.ones([8, 1]), epochs=1, verbose=0)
        saved = [v.numpy() for v in model.variables + model.optimizer.variables()]
        writer.save()
    model.fit(tf.ones([8, 3]), tf.ones([8, 1]), epochs=1, verbose=0)  # changes every value after the last save
    writer.settle()
    assert manager.latest_checkpoint and manager.latest_checkpoint.endswith("ckpt-5")
    assert len(walks) <= 2, walks  # whether it can be traced, then the trace
    assert sorted(p.name for p in (tmp_path / "chief").glob("ckpt-5.*")) == ["ckpt-5.data-00000-of-00001", "ckpt-5.index"]
    fresh = trained_model()
    tf.train.Checkpoint(model=fresh).read(manager.latest_checkpoint).assert_existing_objects_matched()
    restored = [v.numpy() for v in fresh.variables + fresh.optimizer.variables()]
    assert len(restored) == len(saved) and all((a == b).all() for a, b in zip(restored, saved, strict=True))


class Counter(tf.train.experimental.PythonState):
    """Python state: what a traced write would freeze at tracing."""

    def __init__(self) -> None:
        self.value = 0

    def serialize(self) -> str:
        return str(self.value)

    def deserialize(self, string_value: str) -> None:
        self.value = int(string_value)


def test_python_state_keeps_the_eager_write_and_is_saved_as_it_was_at_each_save(tmp_path: Path) -> None:
    counter = Counter()
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0), counter=counter)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "chief"), max_to_keep=1)
    writer = BackupWriter.of_manager(manager, asynchronous=True)
    for value in (1, 2, 3):
        counter.value = value
        writer.save()
        writer.settle()
    restored = Counter()
    tf.train.Checkpoint(v=tf.Variable(0.0), counter=restored).read(manager.latest_checkpoint).expect_partial()
    assert restored.value == 3


@pytest.mark.parametrize("synchronization", [tf.VariableSynchronization.ON_WRITE, tf.VariableSynchronization.ON_READ])
def test_a_scratch_copy_is_written_at_every_save_only_when_reading_a_variable_takes_every_task(
        tmp_path: Path, synchronization: Any) -> None:
    variable = tf.Variable(1.0, synchronization=synchronization, aggregation=tf.VariableAggregation.SUM)
    scratch = tmp_path / "scratch"
    writer = BackupWriter.of_scratch(tf.train.Checkpoint(v=variable), str(scratch), asynchronous=True)
    writer.save()  # the first save: every task takes part (it creates the checkpoint's save counter)
    writer.checkpoint.sync()
    assert (scratch / "backup.index").exists()
    writer.settle()
    writer.save()
    writer.checkpoint.sync()
    assert (scratch / "backup.index").exists() == (synchronization == tf.VariableSynchronization.ON_READ)
    writer.settle()
    assert not scratch.exists()


def run_auto(tmp_path: Path, loop: TrainingLoop) -> list[Any]:
    training = TrainingSpec(module="helpers.tiny_user_code", loop=loop, epochs=EPOCHS, steps_per_epoch=STEPS, batch_size_per_replica=BATCH)
    run_config = RunConfig(name="auto", run_id="r1", strategy=Strategy.DEFAULT, training=training,
                           checkpoint_dir=str(tmp_path), backup_every_steps="auto", async_backups=True)
    stream = io.StringIO()
    reporter = Reporter("auto-chief-0", is_lead=True, stream=stream, token=MANUAL_TOKEN)
    selection = Selection(Duty.TRAIN, Strategy.DEFAULT, None, 0, is_lead=True)
    train(TaskContext(reporter.task, run_config, {}, selection, usercode.load(training), reporter))
    return [e for e in map(EventReader(MANUAL_TOKEN).parse, stream.getvalue().splitlines()) if e]


@pytest.mark.parametrize(("save_freq", "steps_done", "expected", "saved_at"), [
    (3, 7, ResumePoint(1, 1, 6), [3, 6]),
    (5, 11, ResumePoint(2, 0, 10), [5, 10]),
    ("epoch", 7, ResumePoint(1, 0, 5), [5]),
])
def test_the_batch_is_recorded_only_by_a_save_and_resumes_as_tf_keras_own(
    tmp_path: Path, save_freq: int | str, steps_done: int, expected: ResumePoint, saved_at: list[int],
) -> None:
    """The resume points of ``test_resume_point_matches_tf_keras_backup``, without an assign at every step."""
    recorded: list[int] = []  # the checkpoint's batch variable at each step's end

    class Interrupt(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            recorded.append(int(self.model._training_state._ckpt_saved_batch.numpy()))
            if self.model._train_counter.numpy() >= steps_done:
                raise RuntimeError("interrupted")

    model = tf.keras.Sequential([tf.keras.layers.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    inputs = tf.data.Dataset.from_tensors((tf.zeros([4, 2]), tf.zeros([4, 1]))).repeat()
    backups = Backups(str(tmp_path), save_freq=save_freq, asynchronous=False)
    with pytest.raises(RuntimeError, match="interrupted"):
        model.fit(inputs, epochs=3, steps_per_epoch=5, callbacks=[backups, Interrupt()], verbose=0)
    assert resume_point(str(tmp_path), steps_per_epoch=5, step_granular=save_freq != "epoch") == expected
    # Unused (-1) until the first save, then the batch of the last save (an epoch's save is seen a step later).
    seen_at = [step + (save_freq == "epoch") for step in saved_at]
    last_saved = [max((s for s, seen in zip(saved_at, seen_at, strict=True) if seen <= step), default=None)
                  for step in range(1, steps_done + 1)]
    assert recorded == [-1 if s is None else (s - 1) % 5 for s in last_saved]


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_auto_chooses_the_interval_at_each_epochs_end_and_reports_it(tmp_path: Path, loop: TrainingLoop) -> None:
    found = run_auto(tmp_path, loop)
    intervals = [e for e in found if e.event == "backup_interval"]
    assert len(intervals) == EPOCHS, found
    assert all(1 <= e.steps <= 100_000 and e.save_seconds is not None and e.step_seconds for e in intervals), intervals
    assert all(e.reason and "no failure yet" in e.reason for e in intervals), intervals
    assert found[-1].event == "finished"
    assert not (tmp_path / "backup").exists()  # every write landed before the backup was deleted at the end


def test_auto_counts_the_restarts_of_the_launch_the_lead_recorded(tmp_path: Path) -> None:
    record = Path(checkpoint_layout.starts_record(str(tmp_path), "r1"))
    record.parent.mkdir(parents=True)
    record.write_text("1000.000\n2000.000\n")  # the launch's first start, and one restart (a failure) since
    found = run_auto(tmp_path, TrainingLoop.CUSTOM)
    assert len(record.read_text().split()) == 3  # this start: the second restart
    intervals = [e for e in found if e.event == "backup_interval"]
    assert intervals and all(e.mtbf_seconds and e.reason and "(2 failures in " in e.reason for e in intervals), intervals
