"""Every event field is bounded where it has a meaning (``launcher.protocol.events``): what a buggy program prints
(a negative step, an infinite time, a huge count, a name the size of a file) is skipped with one short note, a loss
that diverged reads as null, and a task's own model refuses the same values before it writes them."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from launcher.protocol import events
from launcher.protocol.events import (
    MAX_COUNT,
    MAX_METRICS,
    MAX_NAME,
    MAX_NOTE,
    MAX_NOTES,
    MAX_PATH,
    MAX_SECONDS,
    MAX_TEXT,
    MAX_TIME,
    EventReader,
)

TOKEN = "0123456789abcdef0123456789abcdef"
READER = EventReader(TOKEN)


def line(**fields: object) -> str:
    return f"TFCLUSTER_EVENT/{TOKEN} " + json.dumps({"task": "t", "time": 1.0, **fields})


def raw(payload: str) -> str:
    return f"TFCLUSTER_EVENT/{TOKEN} {payload}"


@pytest.mark.parametrize("fields", [
    {"event": "step", "step": -1},
    {"event": "step", "step": -10**18},
    {"event": "step", "step": MAX_COUNT + 1},
    {"event": "step", "step": 10**400},
    {"event": "step", "step": 3, "total_steps": -1},
    {"event": "step", "step": 3, "epoch": -1},
    {"event": "epoch", "epoch": 10**30},
    {"event": "started", "strategy": "s", "num_replicas_in_sync": -2},
    {"event": "started", "strategy": "s", "num_replicas_in_sync": 1, "epochs": 10**20},
    {"event": "restored", "epoch": 0, "step": -5},
    {"event": "backup_interval", "steps": -1},
    {"event": "preempted", "step": -1},
    {"event": "failed", "exit_code": 10**9},
    {"event": "step", "step": 1, "time": -1.0},
    {"event": "step", "step": 1, "time": 1e308},
    {"event": "step", "step": 1, "time": MAX_TIME + 1},
    {"event": "step_time", "epoch": 0, "seconds_per_step": -0.5},
    {"event": "warm_start", "import_seconds": -1.0},
    {"event": "backup_interval", "steps": 5, "save_seconds": 1e300},
    {"event": "step_time", "epoch": 0, "compute_seconds_per_batch": MAX_SECONDS * 2},
    {"event": "epoch", "epoch": 0, "input_wait_fraction": 3.0},
    {"event": "step", "step": 1, "task": "t" * (MAX_NAME + 1)},
    {"event": "started", "strategy": "s" * (MAX_NAME + 1), "num_replicas_in_sync": 1},
    {"event": "checkpoint", "epoch": 0, "path": "/" * (MAX_PATH + 1)},
    {"event": "epoch", "epoch": 0, "metrics": {"m" * (MAX_NAME + 1): 1.0}},
])
def test_a_field_out_of_its_bounds_skips_the_event(fields: dict[str, object]) -> None:
    assert READER.parse(line(**fields)) is None


@pytest.mark.parametrize("payload", [
    '{"event":"step","task":"t","time":Infinity,"step":1}',
    '{"event":"step","task":"t","time":NaN,"step":1}',
    '{"event":"step","task":"t","time":1e999,"step":1}',
    '{"event":"step_time","task":"t","time":1,"epoch":0,"seconds_per_step":Infinity}',
    '{"event":"warm_start","task":"t","time":1,"import_seconds":NaN}',
])
def test_a_time_or_duration_that_is_not_finite_skips_the_event(payload: str) -> None:
    assert READER.parse(raw(payload)) is None


@pytest.mark.parametrize("loss", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_loss_or_metric_that_is_not_finite_reads_as_null_and_the_event_counts(loss: str) -> None:
    step = READER.parse(raw(f'{{"event":"step","task":"t","time":1,"step":7,"loss":{loss}}}'))
    assert step == events.Step(task="t", time=1, step=7, loss=None)
    epoch = READER.parse(raw(f'{{"event":"epoch","task":"t","time":1,"epoch":0,"metrics":{{"loss":{loss},"acc":0.5}}}}'))
    assert isinstance(epoch, events.EpochEnd) and epoch.metrics == {"loss": None, "acc": 0.5}


def test_the_bounds_themselves_are_inside() -> None:
    event = READER.parse(line(event="step", step=MAX_COUNT, total_steps=MAX_COUNT, epoch=0, time=MAX_TIME, loss=-1e308))
    assert event == events.Step(task="t", time=MAX_TIME, step=MAX_COUNT, total_steps=MAX_COUNT, epoch=0, loss=-1e308)
    metrics = {f"m{i}": float(i) for i in range(MAX_METRICS)}
    assert READER.parse(line(event="finished", metrics=metrics, model_path="/" * MAX_PATH)) is not None


def test_a_long_reason_and_many_metrics_are_cut_not_refused() -> None:
    """A failure's reason is the first line of an exception's message, which may be long, and a model with many
    outputs has many metrics: the event still counts, and the task's own model does not raise."""
    event = READER.parse(line(event="failed", reason="x" * 10**5, exit_code=1))
    assert isinstance(event, events.Failed) and len(event.reason) == MAX_TEXT and event.reason.endswith("…")
    assert events.Failed(reason="y" * 5000, time=1).reason == "y" * (MAX_TEXT - 1) + "…"
    many = {f"m{i}": float(i) for i in range(3 * MAX_METRICS)}
    epoch = READER.parse(line(event="epoch", epoch=0, metrics=many))
    assert isinstance(epoch, events.EpochEnd) and list(epoch.metrics) == list(many)[:MAX_METRICS]
    assert len(events.Finished(metrics=many, time=1).metrics) == MAX_METRICS


def test_a_tasks_own_model_refuses_what_the_controller_would_skip() -> None:
    """The worker imports the same models: ``report_step(-1)`` fails in the program that made the mistake."""
    with pytest.raises(ValidationError):
        events.Step(step=-1, time=1)
    with pytest.raises(ValidationError):
        events.Step(step=1, time=float("inf"))
    assert events.Step(step=1, loss=float("nan"), time=1).loss is None
    assert '"loss":null' in events.format_event(events.Step(step=1, loss=float("inf"), time=1), "t", TOKEN)


def test_the_note_about_a_skipped_event_is_short_whatever_the_line(caplog: pytest.LogCaptureFixture) -> None:
    """The problem quotes a metric's name: a name of a megabyte gives a note of a few hundred characters."""
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        assert READER.parse(line(event="epoch", epoch=0, metrics={"k" * 10**6: "not a number"})) is None
    [record] = caplog.records
    assert len(record.getMessage()) < 3 * MAX_NOTE


def test_the_documented_bounds_are_the_models() -> None:
    documented = (Path(__file__).parents[3] / "docs" / "user_code.md").read_text()
    bounds = documented[documented.index("The bounds (the types of"):documented.index("`launcher.progress` builds its events")]
    for stated in (f"from 0 to 10^{math.log10(MAX_COUNT):.0f};", f"from 0 to\n  10^{math.log10(MAX_SECONDS):.0f};",
                   f"at most {MAX_NAME} characters", f"at most {MAX_PATH};", f"`reason` to {MAX_TEXT} characters",
                   f"its first {MAX_METRICS};"):
        assert stated in bounds
    assert datetime.fromtimestamp(MAX_TIME, UTC).strftime("%Y-%m-%d %H:%M:%S") == "9999-12-31 23:59:59"


def test_a_reader_notes_a_bounded_number_of_skipped_events(caplog: pytest.LogCaptureFixture) -> None:
    """A program that writes malformed events in a loop: the first notes say what is wrong, then one says no more."""
    reader = EventReader(TOKEN)
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        for step in range(3 * MAX_NOTES):
            assert reader.parse(line(event="step", step=-1 - step, task="looping")) is None
    assert len(caplog.records) == MAX_NOTES + 1 and "without a note" in caplog.records[-1].getMessage()
    assert reader.parse(line(event="step", step=3)) == events.Step(task="t", time=1.0, step=3)  # valid ones still count
