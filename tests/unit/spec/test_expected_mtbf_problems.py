"""``restart.expected_mtbf`` is read only by ``checkpoint.backup_every_steps: auto``: stated without it, or under
parameter_server (where auto itself is refused), it is one located line and exit 2, never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.api import parse_spec
from launcher.cli.commands import main
from launcher.spec.problems import SpecError

UNUSED = "restart.expected_mtbf: only used by checkpoint.backup_every_steps: auto"


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="s.yaml")
    return str(info.value).splitlines()


@pytest.mark.parametrize("checkpoint", ["", "checkpoint: {backup_every_steps: 50}\n",
                                        "checkpoint: {backup_every_steps: null}\n"])
def test_a_stated_mtbf_without_auto_is_one_located_line(checkpoint: str) -> None:
    lines = problems(f"name: d\nroles: {{worker: {{replicas: 2}}}}\n{checkpoint}restart:\n  expected_mtbf: 6h\n")
    assert len(lines) == 1 and lines[0].startswith(f"s.yaml:{4 + bool(checkpoint)}: {UNUSED}, which this spec"), lines


def test_under_parameter_server_auto_is_the_one_problem_not_the_mtbf_it_would_read() -> None:
    lines = problems("name: d\nroles: {chief: {}, worker: {replicas: 2}, ps: {}}\n"
                     "checkpoint: {backup_every_steps: auto}\nrestart: {expected_mtbf: 1h}\n")
    assert len(lines) == 1 and lines[0].startswith("s.yaml:3: checkpoint.backup_every_steps: auto is not taken"), lines


@pytest.mark.parametrize("restart", ["{expected_mtbf: 1h}", "{max_restarts: 2}"])
def test_with_auto_or_unstated_the_spec_is_valid(restart: str) -> None:
    checkpoint = "checkpoint: {backup_every_steps: auto}\n" if "mtbf" in restart else ""
    spec = parse_spec(f"name: d\nroles: {{worker: {{replicas: 2}}}}\n{checkpoint}restart: {restart}\n")
    assert spec.restart.expected_mtbf == (3600.0 if "mtbf" in restart else None)


def test_validate_exits_2_with_the_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("name: d\nroles: {worker: {}}\nrestart: {expected_mtbf: 30m}\n")
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    assert f"x.yaml:3: {UNUSED}" in result.output and "Traceback" not in result.output
