"""Summary files: truncation after a restore (torn records too), the last step, no tensorboard; several runs on one board."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import importlib.util  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

pytestmark = pytest.mark.tf  # imports TensorFlow: not in the fast lane
tf = require_module("tensorflow")

from helpers.summaries import curve  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.worker import summaries  # noqa: E402
from launcher.worker.callbacks import ProgressEvents  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402


def write(directory: Path, steps: range) -> None:
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        for step in steps:
            tf.summary.scalar("loss", float(step), step=step)
    writer.close()


def test_truncate_after_keeps_the_points_up_to_the_restored_step(tmp_path: Path) -> None:
    write(tmp_path, range(1, 11))
    summaries.truncate_after(str(tmp_path), 6)
    assert [step for step, _ in curve(tmp_path, "loss")] == [1, 2, 3, 4, 5, 6]
    assert summaries.last_step(str(tmp_path)) == 6
    assert not list(tmp_path.glob(".*tmp")), "the scratch file was left"


def test_a_record_torn_by_a_kill_ends_the_file_and_a_file_left_empty_goes(tmp_path: Path) -> None:
    write(tmp_path, range(1, 5))
    [events] = list(tmp_path.glob("*tfevents*"))
    events.write_bytes(events.read_bytes()[:-7])  # the writer was killed mid-record
    assert summaries.last_step(str(tmp_path)) == 3
    summaries.truncate_after(str(tmp_path), 0)
    assert not list(tmp_path.glob("*tfevents*")) and summaries.last_step(str(tmp_path)) is None


def test_without_tensorboard_a_task_warns_and_writes_nothing(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    run_config = RunConfig(name="x", run_id="r", strategy="default", checkpoint_dir="/c", tensorboard_dir="/c/tb")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        assert summaries.TrainSummaries.open(run_config, True, 0, 32, None) is None
        assert summaries.ValidationSummaries.open(run_config, 0) is None
    assert "not installed" in caplog.text


def test_several_runs_side_by_side_on_one_real_tensorboard(tmp_path: Path) -> None:
    from helpers.boards import free_port, scalar_curves
    from launcher.backends.tensorboard import serve_locally

    for run, steps in (("a", range(1, 4)), ("b", range(1, 6))):
        write(tmp_path / run / "train", steps)
    port = free_port()
    with serve_locally({"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}, "127.0.0.1", port) as board:
        curves = scalar_curves(board.url, ["a/train", "b/train"], "loss")
        assert [int(s) for _, s, _ in curves["a/train"]] == [1, 2, 3]
        assert [int(s) for _, s, _ in curves["b/train"]] == [1, 2, 3, 4, 5]
    assert not board.running()


def test_an_epochs_last_point_is_written_at_its_batch_end_before_a_backup_of_that_step(tmp_path: Path) -> None:
    """BackupAndRestore saves at a batch's end, after this callback: a peer lost before the epoch's end
    (its metrics need a collective) must not leave a backup of a step whose point was never written."""
    directory = tmp_path / "train"
    writer = summaries.TrainSummaries(str(directory), every=3, global_batch=8, optimizer=None, start_step=0)
    progress = ProgressEvents(Reporter("t", is_lead=True, stream=io.StringIO()), steps_per_epoch=4, epochs=1,
                                every=100, input_probe=None, summaries=writer)
    progress.on_epoch_begin(0)
    for batch in range(4):
        progress.on_train_batch_begin(batch)
        progress.on_train_batch_end(batch, {"loss": float(batch)})
    assert [step for step, _ in curve(directory, "loss")] == [3, 4]
    progress.on_epoch_end(0, {"loss": 3.0})
    assert [step for step, _ in curve(directory, "loss")] == [3, 4]  # not a second point at step 4
    writer.close()
