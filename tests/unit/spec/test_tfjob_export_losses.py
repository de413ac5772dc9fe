"""``render --format tfjob`` is never silent about what a TFJob cannot carry: each of ``restart.rules`` (a TFJob's
restartPolicy treats every failure alike) is one located ``warning:`` line naming the rule's lost action."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from launcher.cli.commands import main

SPEC = """name: rl
roles: {chief: {}, worker: {replicas: 2}}
restart:
  max_restarts: 3
  rules:
    - {exit_codes: [3], action: fail}
    - roles: [worker]
      action: continue
"""


def _render(cli: CliRunner, spec: Path, out: Path, fmt: str):
    return cli.invoke(main, ["render", str(spec), "-b", "k8s", "-d", str(out), "--format", fmt])


def test_each_rule_the_tfjob_loses_is_one_located_warning(cli: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    result = _render(cli, spec, tmp_path / "out", "tfjob")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert [w.split(": not in the TFJob")[0] for w in warnings] == [
        f"warning: {spec}:6: restart.rules.0", f"warning: {spec}:7: restart.rules.1"], result.stderr
    assert "rule's fail is lost" in warnings[0] and "rule's continue is lost" in warnings[1]
    tfjob = yaml.safe_load((tmp_path / "out" / "tfjob.yaml").read_text())
    assert tfjob["kind"] == "TFJob"  # still written: what it can carry


def test_without_rules_or_in_native_jobs_nothing_is_warned(cli: CliRunner, tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: rl\nroles: {chief: {}, worker: {replicas: 2}}\n")
    ruled = tmp_path / "s.yaml"
    ruled.write_text(SPEC)
    for spec, fmt in ((plain, "tfjob"), (ruled, "native")):
        result = _render(cli, spec, tmp_path / fmt, fmt)
        assert result.exit_code == 0 and "warning:" not in result.stderr, result.stderr
