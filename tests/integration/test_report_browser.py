"""``tfcluster report`` of a real local run with a known history, opened in a real headless Chromium: what the page
draws (lanes, marks in the right lane, the charts' points, the goodput breakdown), with no console error and no
request but the page itself. The run is a program without TensorFlow (tests/integration/scripts/
history_without_tf.py) under the real supervisor: the chief fails once and is restarted. Each page's screenshot
is saved in the test's tmp dir (its path printed: ``pytest -s`` shows it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers.browser import Visit, open_page
from helpers.local_cluster import tfcluster
from launcher.backends.local.backend import LocalBackend
from launcher.cli.report.page import render

pytestmark = pytest.mark.browser

SCRIPT = Path(__file__).parent / "scripts" / "history_without_tf.py"
NAME = "rep"
TASKS = [f"{NAME}-chief-0", f"{NAME}-worker-0", f"{NAME}-evaluator-0"]
GOODPUT = {"wall_seconds": 412.3, "productive_seconds": 351.0, "fraction": 0.851,
           "lost_seconds": {"start_up": 21.4, "restarts": 17.9, "recomputation": 9.6, "backups": 6.2, "input_wait": 4.1,
                            "stalls": 0.0, "evaluation": 2.1}, "recomputed_steps": 38}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The workspace of a finished run NAME (chief, worker, evaluator; the chief failed once, then succeeded), in
    this test's own TFCLUSTER_HOME (so one run per test: a wider fixture would run before the home is set)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(SCRIPT, workspace / SCRIPT.name)
    result = tfcluster("run", "--chief", "--workers", "1", "--evaluator", "--name", NAME, SCRIPT.name, cwd=workspace, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return workspace


def visit(path: Path) -> Any:
    screenshot = path.with_suffix(".png")
    print(f"screenshot: {screenshot}")
    return open_page(path.as_uri(), screenshot)


def lane(page: Any, task: str) -> Any:
    return page.locator(f"#timeline g.lane[data-task='{task}']")


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return outer["y"] - 1 <= inner["y"] + inner["height"] / 2 <= outer["y"] + outer["height"] + 1


def clean(shown: Visit, url: str) -> None:
    assert shown.errors == []
    assert shown.requests == [url]  # nothing fetched: no script, style, font or image from anywhere


def test_report_draws_the_runs_history(run: Path, tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    result = tfcluster("report", NAME, "-o", str(path), cwd=run)
    assert result.returncode == 0, result.stderr
    status = json.loads(tfcluster("status", NAME, "-o", "json", cwd=run).stdout)
    with visit(path) as shown:
        page = shown.page
        assert page.locator("#timeline g.lane").evaluate_all("lanes => lanes.map(l => l.dataset.task)") == TASKS
        chief = lane(page, TASKS[0])
        assert chief.locator(".mark-failure").count() == 1
        assert inside(chief.locator(".mark-failure").bounding_box(), chief.bounding_box())
        assert chief.locator(".mark-failure title").text_content().startswith("failed: injected failure, exit code 1")
        assert chief.locator(".span-restart").count() == 1 and chief.locator(".span-training").count() == 2
        assert chief.locator(".mark-backup").count() == 2
        assert [lane(page, task).locator(".mark-failure").count() for task in TASKS[1:]] == [0, 0]
        # one account: a lane's restart spans are its task's restarts and preemptions in `status -o json`
        disrupted = {t["name"]: t.get("restarts", 0) + t.get("preemptions", 0) for t in status["tasks"]}
        assert {task: lane(page, task).locator(".span-restart").count() for task in TASKS} == disrupted
        assert lane(page, TASKS[2]).locator(".mark-evaluation").count() == 1
        assert page.locator("#loss-chart circle.loss-point").count() == 10
        assert len(page.locator("#loss-chart polyline.loss-line").get_attribute("points").split()) == 10
        assert page.locator("#rate-chart circle.rate-point").count() == 8  # 4 step intervals in each of the 2 runs
        assert page.locator("#timeline").bounding_box()["height"] > 3 * 20
        goodput = status.get("goodput")
        expected = f"{100 * goodput['fraction']:.1f} %" if goodput else "not measured"
        assert expected in page.locator("#goodput").inner_text()
        assert page.locator("#state").inner_text() == "succeeded"
        # Its own inline style applies under its Content-Security-Policy (the .state-succeeded colour).
        assert page.locator("#state").evaluate("e => getComputedStyle(e).color") == "rgb(27, 127, 59)"
        clean(shown, path.as_uri())


def test_report_draws_the_goodput_breakdown(run: Path, tmp_path: Path) -> None:
    history = LocalBackend().history(NAME)
    assert history is not None
    path = tmp_path / "goodput.html"
    path.write_text(render(history.model_copy(update={"status": {**history.status, "goodput": GOODPUT}})))
    with visit(path) as shown:
        page = shown.page
        assert page.locator("#goodput-fraction").inner_text() == "85.1 %"
        parts = ["productive", *GOODPUT["lost_seconds"]]
        seconds = {part: page.locator(f"#goodput tr[data-part='{part}'] td.seconds").inner_text() for part in parts}
        assert seconds == {"productive": "351.0 s", **{part: f"{value:.1f} s" for part, value in GOODPUT["lost_seconds"].items()}}
        bar = page.locator("#goodput .bar").bounding_box()
        productive = page.locator("#goodput .bar .part-productive").bounding_box()
        assert productive["width"] / bar["width"] == pytest.approx(351.0 / 412.3, abs=0.01)
        assert page.locator("#goodput .bar .part-stalls").count() == 0  # nothing lost there: nothing drawn
        clean(shown, path.as_uri())
