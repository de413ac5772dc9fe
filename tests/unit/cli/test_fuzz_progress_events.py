"""Whatever values a program's own progress events carry (the documented protocol, which buggy user code writes
by hand), the way from its output line to what a person reads stays bounded: read (``EventReader``), folded
(``launcher.protocol.job_progress``), shown (``status`` and the live view) and drawn (``report``), in bounded time
(the timeout) and memory (``tracemalloc``), into output of bounded size."""

from __future__ import annotations

import io
import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from launcher import api
from launcher.cli.report.page import render as render_page
from launcher.cli.watch import status_view
from launcher.plan.targets import BackendKind
from launcher.protocol import events
from launcher.protocol.events import MAX_METRICS, MAX_NAME, MAX_PATH, MAX_TEXT, EventReader
from launcher.protocol.job_progress import JobProgress, fold
from launcher.supervision.history import RunHistory
from launcher.supervision.status import JobStatus, State, TaskStatus
from launcher.supervision.stragglers import StepBreakdown

TOKEN = "0123456789abcdef0123456789abcdef"
PLAN = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {}}}))
LEAD = PLAN.lead().name
MODELS = {model.model_fields["event"].default.value: model for model in (
    events.Started, events.Restored, events.Step, events.EpochEnd, events.CheckpointSaved, events.Evaluation,
    events.Finished, events.Failed, events.Preempted, events.StepTime, events.StacksOnSignal, events.BackupInterval,
    events.WarmStart)}
TEXTS = {"task", "strategy", "role", "path", "checkpoint", "model_path", "reason", "signal"}
#: The extremes a buggy program writes: near zero, denormal, at the float's limits, beyond int64, far beyond.
EXTREMES = [0, -1, 1e-15, 1.1e-15, 5e-324, -5e-324, 1e308, -1e308, 1e16, 1e16 + 2, 2**63, -(2**63), 10**19, 10**400,
            -(10**400), float("nan"), float("inf"), float("-inf")]
NUMBERS = st.one_of(st.sampled_from(EXTREMES), st.integers(), st.floats())
STRINGS = st.one_of(st.text(max_size=64), st.integers(0, 20_000).map(lambda n: "x" * n))
METRICS = st.dictionaries(st.one_of(st.sampled_from(["loss", "accuracy", "val_loss"]), STRINGS),
                          st.one_of(st.none(), NUMBERS), max_size=300)
#: Output a person reads of one job, whatever its events: its status text, and its page per event read (what an
#: event may hold at most, each character escaped to at most six).
STATUS_CHARS = 40_000
PAGE_CHARS, PAGE_CHARS_PER_EVENT = 60_000, 6 * (MAX_METRICS * (MAX_NAME + 16) + 2 * MAX_PATH + MAX_TEXT)
PEAK_BYTES = 64 * 2**20


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(MODELS)))
    payload: dict[str, Any] = {"event": kind}
    for name in MODELS[kind].model_fields:
        if name == "event" or not draw(st.integers(0, 5)):
            continue  # a field left out now and then (a required one: the event is skipped)
        payload[name] = draw(METRICS if name == "metrics" else STRINGS if name in TEXTS else NUMBERS)
    return payload


def status_text(job: JobStatus) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(status_view(job))
    return console.export_text()


@pytest.mark.timeout(600)
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(payloads(), min_size=1, max_size=8))
def test_any_event_values_give_bounded_status_and_report(sent: list[dict[str, Any]]) -> None:
    reader = EventReader(TOKEN)
    lines = [f"TFCLUSTER_EVENT/{TOKEN} {json.dumps({'time': 100.0 + i, **payload})}" for i, payload in enumerate(sent)]
    tracemalloc.start()
    try:
        read = [event for event in map(reader.parse, lines) if event is not None]
        job = JobStatus("job", BackendKind.LOCAL, State.RUNNING, [
            TaskStatus(LEAD, State.RUNNING, step_time=next(
                (StepBreakdown.of(e) for e in reversed(read) if isinstance(e, events.StepTime)), None))],
            progress=fold(JobProgress(), read, from_lead=True))
        shown = status_text(job)
        page = render_page(RunHistory(plan=PLAN, status={"state": "running", "tasks": []}, events={LEAD: read}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(shown) < STATUS_CHARS
    assert len(page) < PAGE_CHARS + PAGE_CHARS_PER_EVENT * len(read)
    assert peak < PEAK_BYTES
