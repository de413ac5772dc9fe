"""``tfcluster report``: a run's history folded into lanes (``launcher.cli.report.timeline``) and drawn as one static
page (``launcher.cli.report.page``), read back with the standard library's HTML parser. What a browser draws of
it: tests/integration/test_report_browser.py."""

from __future__ import annotations

import stat
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from launcher import api
from launcher.cli import commands
from launcher.cli.commands import main
from launcher.cli.report.page import render
from launcher.cli.report.timeline import Kind, timeline
from launcher.errors import LaunchError
from launcher.protocol import events
from launcher.supervision.history import RunHistory

PLAN = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {}, "evaluator": {}}}))
CHIEF, WORKER, EVALUATOR = "job-chief-0", "job-worker-0", "job-evaluator-0"
GOODPUT = {"wall_seconds": 100.0, "productive_seconds": 80.0, "fraction": 0.8,
           "lost_seconds": {"start_up": 10.0, "restarts": 5.0, "recomputation": 2.0, "backups": 1.0, "input_wait": 1.0,
                            "stalls": 0.0, "evaluation": 1.0}, "recomputed_steps": 7}


def started(time: float) -> events.Started:
    return events.Started(time=time, strategy="MultiWorkerMirroredStrategy", num_replicas_in_sync=2)


def history(status: dict[str, Any] | None = None, chief: list[events.Event] | None = None) -> RunHistory:
    """Chief: starts at 10, steps 1-4 from 20 to 50 (a backup at 40), fails at 55; restarts at 70, restored at step 2,
    steps 3-4 at 80 and 90. The worker starts at 12 and at 71; the evaluator evaluates once at 60."""
    chief = chief if chief is not None else [
        started(10), *(events.Step(time=20 + 10 * i, step=i + 1, loss=1.0 / (i + 1)) for i in range(4)),
        events.CheckpointSaved(time=40, path="ckpt-1", epoch=0), events.Failed(time=55, reason="boom", exit_code=1),
        started(70), events.Restored(time=72, epoch=0, step=2),
        events.Step(time=80, step=3, loss=0.3), events.Step(time=90, step=4, loss=0.25)]
    return RunHistory(plan=PLAN, status={"state": "succeeded", "started_at": 0.0, "tasks": [], **(status or {})},
                      events={CHIEF: chief, WORKER: [started(12), started(71)],
                              EVALUATOR: [started(11), events.Evaluation(time=60, checkpoint="ckpt-1", metrics={"loss": 0.5})]})


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes, and the page's text."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def classed(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.tags if name in (attrs.get("class") or "").split()]


def test_one_lane_per_task_with_its_runs_spans_and_marks() -> None:
    drawn = timeline(history())
    assert [lane.task for lane in drawn.lanes] == [CHIEF, WORKER, EVALUATOR]
    chief = drawn.lanes[0]
    assert [(s.kind, s.start, s.end) for s in chief.spans] == [
        (Kind.START_UP, 0.0, 20), (Kind.TRAINING, 20, 55), (Kind.RESTART, 55, 80), (Kind.TRAINING, 80, 90)]
    assert [(m.kind, m.time) for m in chief.marks] == [(Kind.BACKUP, 40), (Kind.FAILURE, 55), (Kind.RESTART, 72)]
    assert [m.kind for m in drawn.lanes[2].marks] == [Kind.EVALUATION]
    assert drawn.loss == [(1, 1.0), (2, 0.5), (3, 1 / 3), (4, 0.25), (3, 0.3), (4, 0.25)]
    assert drawn.step_rate == [(25, 0.1), (35, 0.1), (45, 0.1), (85, 0.1)]  # not across the restart


@pytest.mark.parametrize("prelude", [
    [events.StacksOnSignal(time=5, signal="SIGUSR2")],
    [events.WarmStart(time=4, import_seconds=3.0), events.StacksOnSignal(time=5, signal="SIGUSR2")]])
def test_what_a_run_announces_before_its_start_belongs_to_that_run_not_a_restart(prelude: list[events.Event]) -> None:
    """The entrypoint says it dumps stacks (and a standby that it ran warm) before ``started``: the first run's
    start-up, never a restart the run did not have; a restart's own announcements begin that restart."""
    restart = [events.WarmStart(time=60, import_seconds=3.0), events.StacksOnSignal(time=61, signal="SIGUSR2")]
    chief = [*prelude, started(10), events.Step(time=20, step=1), events.Step(time=30, step=2),
             events.Failed(time=40, reason="boom", exit_code=1), *restart, started(62), events.Step(time=70, step=3)]
    lane = timeline(history(chief=chief)).lanes[0]
    assert [(s.kind, s.start, s.end) for s in lane.spans] == [
        (Kind.START_UP, 0.0, 20), (Kind.TRAINING, 20, 40), (Kind.RESTART, 40, 70)]


def test_a_failed_task_that_reported_no_failure_is_marked_at_its_last_event_with_its_exit_code() -> None:
    chief = [started(10), events.Step(time=20, step=1)]
    drawn = timeline(history({"state": "failed", "tasks": [{"name": CHIEF, "state": "failed", "exit_code": 137}]}, chief))
    assert [(m.kind, m.time, m.label) for m in drawn.lanes[0].marks] == [(Kind.FAILURE, 20, "exited with code 137")]


def test_the_page_draws_lanes_marks_goodput_and_loss_and_refers_to_nothing_outside() -> None:
    page = render(history({"goodput": GOODPUT}))
    found = Elements(page)
    assert [a["data-task"] for a in found.classed("lane")] == [CHIEF, WORKER, EVALUATOR]
    assert len(found.classed("mark-failure")) == 1 and len(found.classed("span-restart")) == 2  # chief, worker
    assert len(found.classed("loss-point")) == 6
    parts = [a["data-part"] for _, a in found.tags if "data-part" in a]
    assert parts == ["productive", "start_up", "restarts", "recomputation", "backups", "input_wait", "stalls", "evaluation",
                     "slow_steps", "finishing"]
    assert "80.0 %" in found.text
    assert not [tag for tag, attrs in found.tags if tag in ("script", "link", "img", "iframe") or "src" in attrs or "href" in attrs]


def test_a_run_without_goodput_says_not_measured() -> None:
    found = Elements(render(history()))
    assert not [a for _, a in found.tags if "data-part" in a]
    assert any("not measured" in text for text in found.text)


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_every_text_from_a_task_or_a_status_is_escaped() -> None:
    chief = [started(10), events.Failed(time=20, reason=HOSTILE), started(30), events.Restored(time=31, epoch=0, step=1),
             events.Step(time=32, step=2, loss=0.5), events.Step(time=33, step=3, loss=0.4)]
    evaluation = events.Evaluation(time=34, checkpoint=HOSTILE, metrics={HOSTILE: 0.5})
    hostile = history({"message": HOSTILE, "tasks": [{"name": HOSTILE, "state": "failed", "exit_code": 1}]}, chief)
    page = render(hostile.model_copy(update={"events": {**hostile.events, EVALUATOR: [started(11), evaluation]}}))
    found = Elements(page)
    assert "<script" not in page and not [tag for tag, _ in found.tags if tag in ("script", "img")]
    # The message, the failure's title, the evaluation's checkpoint and metric, as text.
    assert sum(HOSTILE in text for text in found.text) >= 3, found.text


@pytest.mark.parametrize(("field", "value"), [
    ("restarts", HOSTILE), ("preemptions", "<script>alert(1)</script>"), ("restarts", -1), ("restarts", 1.5),
    ("state", "<b>"), ("message", ["<script>"]), ("started_at", float("nan")),
    ("tasks", [{"name": CHIEF, "state": "failed", "exit_code": HOSTILE}]), ("stall", {"stalls": HOSTILE}),
    ("goodput", {**GOODPUT, "recomputed_steps": HOSTILE}), ("goodput", {**GOODPUT, "wall_seconds": float("inf")}),
    ("goodput", {**GOODPUT, "lost_seconds": {"start_up": HOSTILE}}),
])
def test_a_status_value_of_the_wrong_type_is_refused_in_one_line_and_drawn_nowhere(field: str, value: Any) -> None:
    """The status may come from a file or a ConfigMap someone else can write: a value the page would write
    as it is (a count, a state in a class name) must be what tfcluster writes there, or no page is made."""
    with pytest.raises(LaunchError) as refused:
        render(history({field: value}))
    message = str(refused.value)
    assert message.startswith(f"the status of 'job' is not one tfcluster writes ({field}") and "\n" not in message
    assert "<script" not in message


def test_the_page_allows_no_script_and_no_fetch() -> None:
    page = render(history({"goodput": GOODPUT, "restarts": 2}))
    [csp] = [attrs["content"] for tag, attrs in Elements(page).tags
             if tag == "meta" and (attrs.get("http-equiv") or "").lower() == "content-security-policy"]
    assert csp == "default-src 'none'; style-src 'unsafe-inline'"
    assert "2 restarts" in page


def test_env_values_are_not_shown() -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {"env": {"API_KEY": "s3cr3t-value"}}}}))
    page = render(RunHistory(plan=plan, status={"state": "running", "tasks": []}, events={}))
    assert "s3cr3t-value" not in page and "API_KEY" in page


class _Backend:
    """What ``report`` asks a backend for: the run's history."""

    def __init__(self, status: dict[str, Any] | None = None):
        self.status = status

    def history(self, name: str) -> RunHistory:
        return history(self.status)


def _report(monkeypatch: pytest.MonkeyPatch, cli, *args: str, status: dict[str, Any] | None = None):
    monkeypatch.setattr(commands, "_backend_for", lambda name, backend: _Backend(status))
    return cli.invoke(main, ["report", "job", *args])


def test_report_never_writes_through_a_symbolic_link(monkeypatch: pytest.MonkeyPatch, cli, tmp_path: Path) -> None:
    """In a directory others can write (/tmp, a shared checkout), a link planted at the page's default path (or
    one given with -o) must not make ``report`` overwrite the file it points to."""
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for link, args in ((tmp_path / "job-report.html", ()), (tmp_path / "named.html", ("-o", "named.html"))):
        link.symlink_to(victim)
        result = _report(monkeypatch, cli, *args)
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [
            f"tfcluster report: {link.name} is a symbolic link: the report is never written through one "
            "(remove it, or name another file with -o)"]
        assert victim.read_text() == "precious" and link.is_symlink()
        link.unlink()
    result = _report(monkeypatch, cli)
    assert result.exit_code == 0, result.output
    page = tmp_path / "job-report.html"
    assert victim.read_text() == "precious" and not page.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600  # it quotes task output and commands: yours to share
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job-report.html", "victim"]


def test_report_of_a_malformed_status_is_one_line_exit_1_and_writes_nothing(monkeypatch: pytest.MonkeyPatch, cli,
                                                                              tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    result = _report(monkeypatch, cli, status={"restarts": "<script>alert(1)</script>"})
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: the status of 'job' is not one tfcluster writes (restarts: Input should be a valid integer; "
        "1 problem(s) in all): no report drawn"]
    assert not list(tmp_path.iterdir())
