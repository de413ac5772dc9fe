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

tf = pytest.importorskip("tensorflow")

from launcher.protocol.events import parse_event  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.spec.models import Strategy, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import usercode  # noqa: E402
from launcher.worker.backups import BackupWriter  # noqa: E402
from launcher.worker.context import TaskContext  # noqa: E402
from launcher.worker.interval import AutoInterval, steps_between  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402
from launcher.worker.selection import Action, Selection  # noqa: E402
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
    assert auto.decide(0.1).steps == 50  # no backup measured yet
    auto.saved(0.5)  # sets the writer up
    auto.saved(0.07)  # traces its copy to host memory
    auto.saved(0.01)
    auto.saved(0.01)
    decided = auto.decide(0.1)
    assert (decided.steps, decided.save_seconds, decided.step_seconds) == (5, 0.01, 0.1) and auto.steps == 5


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


def run_auto(tmp_path: Path, loop: TrainingLoop) -> list[Any]:
    training = TrainingSpec(module="helpers.tiny_user_code", loop=loop, epochs=EPOCHS, steps_per_epoch=STEPS, batch_size_per_replica=BATCH)
    run_config = RunConfig(name="auto", run_id="r1", strategy=Strategy.DEFAULT, training=training,
                           checkpoint_dir=str(tmp_path), backup_every_steps="auto", async_backups=True)
    stream = io.StringIO()
    reporter = Reporter("auto-chief-0", is_lead=True, stream=stream)
    selection = Selection(Action.TRAIN, Strategy.DEFAULT, None, 0, is_lead=True)
    train(TaskContext(reporter.task, run_config, {}, selection, usercode.load(training), reporter))
    return [e for e in map(parse_event, stream.getvalue().splitlines()) if e]


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_auto_chooses_the_interval_at_each_epochs_end_and_reports_it(tmp_path: Path, loop: TrainingLoop) -> None:
    found = run_auto(tmp_path, loop)
    intervals = [e for e in found if e.event == "backup_interval"]
    assert len(intervals) == EPOCHS, found
    assert all(1 <= e.steps <= 100_000 and e.save_seconds is not None and e.step_seconds for e in intervals), intervals
    assert found[-1].event == "finished"
    assert not (tmp_path / "backup").exists()  # every write landed before the backup was deleted at the end
