"""Golden files for the text and JSON dry-run of every example spec.

Regenerate after an intended change with ``TFCLUSTER_UPDATE_GOLDEN=1 pytest tests/unit/plan/test_golden.py``
(exactly ``1``; refused when ``CI`` is set). A regenerating run fails on every file it rewrote, naming it, so a
human reviews the diff before the next run passes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO  # noqa: I001
from launcher.backends import tcmalloc
from launcher.cli.commands import main

GOLDEN = Path(__file__).parent / "golden"
#: Listed, not globbed: a stray file in examples/ cannot break (or silently extend) the goldens.
EXAMPLES = [REPO / "examples" / f"{name}.yaml" for name in ("demo", "parameter-server", "reference", "tfjob")]
UPDATE = "TFCLUSTER_UPDATE_GOLDEN"


def _normalise(text: str) -> str:
    """Replace what depends on the machine (interpreter path, working dir) with placeholders."""
    return text.replace(sys.executable, "<python>").replace(str(REPO), "<repo>")


def updating(environ: os._Environ[str] | dict[str, str]) -> bool:
    """Whether this run rewrites the goldens: only with ``TFCLUSTER_UPDATE_GOLDEN=1``, never under CI."""
    value = environ.get(UPDATE, "")
    if value and value != "1":
        pytest.fail(f"{UPDATE}={value!r}: set it to exactly 1 to rewrite the golden files, or unset it")
    if value and environ.get("CI"):
        pytest.fail(f"{UPDATE} is refused when CI is set: regenerate the golden files locally and commit the reviewed diff")
    return value == "1"


def compare(golden: Path, actual: str, update: bool) -> None:
    """Assert ``actual`` is the golden file; when updating, rewrite a differing file and fail naming it."""
    if update and (not golden.exists() or golden.read_text() != actual):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(actual)
        pytest.fail(f"rewrote {os.path.relpath(golden, REPO)}: review the diff (git diff), then run again without {UPDATE}")
    assert golden.exists(), f"missing {golden}; run with {UPDATE}=1"
    assert actual == golden.read_text()


@pytest.mark.parametrize("backend", ["local", "compose", "k8s"])
@pytest.mark.parametrize("output", ["text", "json", "plan"])
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_dry_run_matches_golden(example: Path, output: str, backend: str, cli, monkeypatch) -> None:
    update = updating(os.environ)
    monkeypatch.chdir(REPO)
    # A local plan's tasks preload the allocator this host has: the goldens show a Debian host's, on any machine.
    monkeypatch.setattr(tcmalloc, "preload_env", lambda: {
        tcmalloc.PRELOAD: f"/usr/lib/x86_64-linux-gnu/{tcmalloc.LIBRARY}", **tcmalloc.QUIET})
    result = cli.invoke(main, ["dry-run", str(example.relative_to(REPO)), "-o", output, "-b", backend],
                        env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    compare(GOLDEN / f"{example.stem}.{backend}.{output}", _normalise(result.stdout), update)


@pytest.mark.parametrize("environ, rewrites", [({}, False), ({UPDATE: "1"}, True)])
def test_only_exactly_one_rewrites(environ: dict[str, str], rewrites: bool) -> None:
    assert updating(environ) is rewrites


@pytest.mark.parametrize("environ", [{UPDATE: "0"}, {UPDATE: "yes"}, {UPDATE: "1", "CI": "true"}])
def test_other_values_and_ci_are_refused(environ: dict[str, str]) -> None:
    with pytest.raises(pytest.fail.Exception, match=UPDATE):
        updating(environ)


def test_a_regenerating_run_fails_naming_the_rewritten_file(tmp_path: Path) -> None:
    golden = REPO / "tests" / "unit" / "plan" / "golden" / "demo.local.text"
    target = tmp_path / golden.name
    target.write_text("stale\n")
    with pytest.raises(pytest.fail.Exception, match="rewrote"):
        compare(target, golden.read_text(), update=True)
    assert target.read_text() == golden.read_text()
    compare(target, golden.read_text(), update=True)  # unchanged: passes, nothing to review
