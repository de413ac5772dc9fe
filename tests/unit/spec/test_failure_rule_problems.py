"""``validate`` of ``restart.rules``: one located line per problem, exit 2, and a valid set plans."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.api import parse_spec, plan
from launcher.cli.commands import main
from launcher.spec.models import RuleAction
from launcher.spec.problems import SpecError

HEAD = "name: d\nroles:\n  worker: {replicas: 2}\nrestart:\n  rules:\n"


def problems(rules: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(HEAD + rules, source="s.yaml")
    return str(info.value).splitlines()


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("{action: fail}", "s.yaml:6: restart.rules.0: states no matcher"),
        ("{exit_codes: [256], action: fail}", "s.yaml:6: restart.rules.0.exit_codes.0: Input should be less than or equal to 255"),
        ("{exit_codes: [-1], action: fail}", "s.yaml:6: restart.rules.0.exit_codes.0: Input should be greater than or equal to 0"),
        ("{signals: [SIGFOO], action: fail}", "s.yaml:6: restart.rules.0.signals.0: unknown signal 'SIGFOO'"),
        ("{log_pattern: '(x', action: fail}", "s.yaml:6: restart.rules.0.log_pattern: does not compile as an RE2 pattern: missing )"),
        ("{log_pattern: '', action: fail}", "s.yaml:6: restart.rules.0.log_pattern:"),
        ("{roles: [evaluator], action: continue}", "s.yaml:6: restart.rules.0.roles.0: the spec has no evaluator (roles: worker)"),
        ("{exit_codes: [3], action: explode}", "s.yaml:6: restart.rules.0.action: Input should be 'restart', 'fail' or 'continue'"),
        ("{exit_code: [3], action: fail}", "s.yaml:6: restart.rules.0.exit_code: unknown field"),
    ],
)
def test_each_bad_rule_is_one_located_line(rule: str, expected: str) -> None:
    lines = problems(f"    - {rule}\n")
    assert len(lines) == 1 and lines[0].startswith(expected), lines


def test_every_bad_rule_is_reported_at_once_and_validate_exits_2(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(HEAD + "    - {action: fail}\n    - {signals: [SIGNOPE], action: fail}\n"
                                     "    - {log_pattern: '[z-a]', action: restart}\n")
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "restart.rules.0", "restart.rules.1.signals.0", "restart.rules.2.log_pattern"], lines
    assert "Traceback" not in result.output


def test_valid_rules_reach_the_plans_policy_in_order() -> None:
    spec = parse_spec(HEAD + "    - {exit_codes: [3], action: fail}\n    - {log_pattern: 'CUDA_ERROR_ECC', action: restart}\n"
                      "    - {signals: [SIGKILL], roles: [worker], action: continue}\n")
    rules = plan(spec).policy.failure_rules
    assert [rule.action for rule in rules] == [RuleAction.FAIL, RuleAction.RESTART, RuleAction.CONTINUE]
    assert rules[2].signals == ("SIGKILL",)
