"""The per-epoch input-wait fraction, reported by the real entrypoint training loops in one process.

The user code of those runs is ``helpers.tiny_user_code``. The input probe's timing is
replaced by a fixed answer (a pipeline that needs far longer than any step,
or no time at all), so the verdict does not depend on the machine's load;
the measurement itself, with real slow pipelines and steps, is in
``bench/bench_input_wait.py``.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

tf = require_module("tensorflow")

from launcher.protocol.events import MANUAL_TOKEN, EventReader  # noqa: E402
from launcher.protocol.runconfig import RunConfig  # noqa: E402
from launcher.spec.models import Strategy, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import callbacks, usercode  # noqa: E402
from launcher.worker.callbacks import ProgressEvents  # noqa: E402
from launcher.worker.context import TaskContext  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402
from launcher.worker.selection import Duty, Selection  # noqa: E402
from launcher.worker.train import train  # noqa: E402

pytestmark = pytest.mark.tf

EPOCHS, STEPS, BATCH = 2, 8, 4
#: Seconds per batch the probe reports for a pipeline that cannot keep up: longer than any step of this model.
HOURS = 3600.0






def probe_answering(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[int]:
    """The probe reads real batches of the task's pipeline, then reports ``seconds`` per batch; returns batches read."""
    read: list[int] = []

    def seconds_per_batch(probe: Iterable[Any], batches: int) -> float:
        read.append(sum(1 for _, _ in zip(range(batches), probe, strict=False)))
        return seconds

    monkeypatch.setattr(callbacks, "seconds_per_batch", seconds_per_batch)
    return read




def run_single_task(tmp_path: Path, loop: TrainingLoop, kind: str = "epoch") -> list[Any]:
    """Train this module in-process with the default strategy; the events of ``kind``."""
    training = TrainingSpec(module="helpers.tiny_user_code", loop=loop, epochs=EPOCHS, steps_per_epoch=STEPS, batch_size_per_replica=BATCH)
    run_config = RunConfig(name="input", run_id="r1", strategy=Strategy.DEFAULT, training=training, checkpoint_dir=str(tmp_path))
    stream = io.StringIO()
    reporter = Reporter("input-chief-0", is_lead=True, stream=stream, token=MANUAL_TOKEN)
    selection = Selection(Duty.TRAIN, Strategy.DEFAULT, None, 0, is_lead=True)
    train(TaskContext(reporter.task, run_config, {}, selection, usercode.load(training), reporter))
    events = [EventReader(MANUAL_TOKEN).parse(line) for line in stream.getvalue().splitlines()]
    return [e for e in events if e and e.event == kind]


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_a_pipeline_slower_than_the_step_is_reported_input_bound(tmp_path: Path, loop: TrainingLoop, caplog, monkeypatch) -> None:
    read = probe_answering(monkeypatch, HOURS)
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        epochs = run_single_task(tmp_path, loop)
    fractions = [e.input_wait_fraction for e in epochs]
    assert fractions == [1.0] * EPOCHS and len(read) == EPOCHS and all(read), (fractions, read)
    warnings = [r.getMessage() for r in caplog.records if "input-bound" in r.getMessage()]
    assert len(warnings) == EPOCHS, caplog.text


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_a_pipeline_faster_than_the_step_is_not(tmp_path: Path, loop: TrainingLoop, caplog, monkeypatch) -> None:
    probe_answering(monkeypatch, 0.0)
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        epochs = run_single_task(tmp_path, loop)
    fractions = [e.input_wait_fraction for e in epochs]
    assert fractions == [0.0] * EPOCHS, fractions
    assert "input-bound" not in caplog.text


@pytest.mark.parametrize("loop", list(TrainingLoop))
def test_each_epoch_reports_the_tasks_step_time_breakdown(tmp_path: Path, loop: TrainingLoop, monkeypatch) -> None:
    """Input and compute measured by their probes (compute for real), the rest of the step is peer wait."""
    probe_answering(monkeypatch, 0.0)
    step_times = run_single_task(tmp_path, loop, kind="step_time")
    assert len(step_times) == EPOCHS
    for times in step_times:
        assert times.input_seconds_per_batch == 0.0 and times.compute_seconds_per_batch > 0, times
        assert times.peer_wait_seconds_per_step == pytest.approx(
            max(0.0, times.seconds_per_step - times.compute_seconds_per_batch), abs=1e-6), times


def test_peer_wait_is_the_step_beyond_the_larger_of_input_and_compute() -> None:
    assert callbacks.peer_wait_seconds(0.5, 0.1, 0.2) == 0.3
    assert callbacks.peer_wait_seconds(0.5, 0.4, 0.2) == pytest.approx(0.1)
    assert callbacks.peer_wait_seconds(0.1, 0.0, 0.2) == 0.0  # timer noise: never negative
    assert callbacks.peer_wait_seconds(0.5, None, 0.2) == 0.3
    assert callbacks.peer_wait_seconds(0.5, 0.1, None) is None and callbacks.peer_wait_seconds(None, 0.1, 0.2) is None


def test_without_a_probe_the_fraction_is_null_and_nothing_is_claimed(caplog) -> None:
    """The PSS coordinator cannot iterate the workers' pipelines: the event says null."""
    stream = io.StringIO()
    progress = ProgressEvents(Reporter("t", is_lead=True, stream=stream, token=MANUAL_TOKEN), steps_per_epoch=2, epochs=1, every=1,
                                input_probe=None)
    progress.on_epoch_begin(0)
    for batch in range(2):
        progress.on_train_batch_begin(batch)
        progress.on_train_batch_end(batch, {"loss": 1.0})
    with caplog.at_level(logging.WARNING, logger="launcher.worker"):
        progress.on_epoch_end(0, {"loss": 1.0})
    [epoch] = [e for e in map(EventReader(MANUAL_TOKEN).parse, stream.getvalue().splitlines()) if e and e.event == "epoch"]
    assert epoch.input_wait_fraction is None and "input-bound" not in caplog.text


@pytest.mark.parametrize(("epoch", "first_batch"), [(0, 0), (15, 7)], ids=["a start", "a restore mid-epoch"])
def test_a_runs_first_step_is_reported_whatever_its_number_then_every_few(epoch: int, first_batch: int) -> None:
    """Start-up and a restart end at the run's first step (goodput, the stall watchdog's first-step clock)."""
    stream = io.StringIO()
    progress = ProgressEvents(Reporter("t", is_lead=True, stream=stream, token=MANUAL_TOKEN), steps_per_epoch=20,
                                epochs=20, every=5, input_probe=None)
    progress.on_epoch_begin(epoch)
    for batch in range(first_batch, 20):
        progress.on_train_batch_begin(batch)
        progress.on_train_batch_end(batch, {"loss": 1.0})
    reader = EventReader(MANUAL_TOKEN)
    steps = [e.step for e in map(reader.parse, stream.getvalue().splitlines()) if e and e.event == "step"]
    base = epoch * 20
    assert steps == [base + first_batch + 1, *(base + n for n in (5, 10, 15, 20) if n > first_batch + 1)]
