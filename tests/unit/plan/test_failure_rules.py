"""The failure rules' pure policy (``launcher.plan.policy.first_rule``): every matcher, first match wins, no match."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.plan.policy import Failure, RuleMatch, first_rule
from launcher.spec.models import FailureRule, RoleType, RuleAction

WORKER = RoleType.WORKER


def rules(*specs: dict[str, Any]) -> tuple[FailureRule, ...]:
    return tuple(FailureRule.model_validate(spec) for spec in specs)


def failure(code: int, role: RoleType = WORKER, tail: tuple[str, ...] = (), oom: bool = False) -> Failure:
    return Failure(role=role, exit_code=code, log_tail=tail, oom_killed=oom)


def test_exit_codes_match_only_their_codes() -> None:
    stated = rules({"exit_codes": [3, 4], "action": "fail"})
    assert first_rule(stated, failure(3)) == RuleMatch(number=1, action=RuleAction.FAIL, why="exit code 3")
    assert first_rule(stated, failure(1)) is None


def test_signals_match_by_name_and_an_oom_kill_says_so() -> None:
    stated = rules({"signals": ["SIGKILL"], "action": "restart"})
    assert first_rule(stated, failure(137)) == RuleMatch(number=1, action=RuleAction.RESTART, why="signal SIGKILL")
    oom = first_rule(stated, failure(137, oom=True))
    assert oom is not None and oom.why == "signal SIGKILL, OOM-killed"
    assert first_rule(stated, failure(143)) is None  # SIGTERM
    assert first_rule(stated, failure(9)) is None  # exit 9 is no signal


def test_an_oom_kill_the_engine_reports_matches_sigkill_whatever_the_code() -> None:
    stated = rules({"signals": ["SIGKILL"], "action": "fail"})
    matched = first_rule(stated, failure(1, oom=True))
    assert matched is not None and "OOM-killed" in matched.describe()


def test_log_pattern_is_searched_in_the_tail_lines() -> None:
    stated = rules({"log_pattern": r"CUDA_ERROR_(ECC|LAUNCH)", "action": "restart"})
    matched = first_rule(stated, failure(1, tail=("step 7", "RuntimeError: CUDA_ERROR_ECC uncorrectable", "bye")))
    assert matched is not None and matched.why == "log pattern 'CUDA_ERROR_(ECC|LAUNCH)'"
    assert first_rule(stated, failure(1, tail=("step 7", "ValueError: bad input"))) is None
    assert first_rule(stated, failure(1)) is None


def test_roles_match_the_failed_tasks_role() -> None:
    stated = rules({"roles": ["evaluator"], "action": "continue"})
    matched = first_rule(stated, failure(1, role=RoleType.EVALUATOR))
    assert matched == RuleMatch(number=1, action=RuleAction.CONTINUE, why="role evaluator")
    assert first_rule(stated, failure(1, role=RoleType.CHIEF)) is None


def test_every_stated_matcher_must_hold() -> None:
    stated = rules({"exit_codes": [3], "roles": ["chief"], "action": "fail"})
    assert first_rule(stated, failure(3, role=RoleType.WORKER)) is None
    matched = first_rule(stated, failure(3, role=RoleType.CHIEF))
    assert matched is not None and matched.why == "exit code 3, role chief"


def test_first_match_wins() -> None:
    stated = rules({"exit_codes": [3], "action": "fail"}, {"roles": ["worker"], "action": "continue"},
                   {"exit_codes": [3], "action": "restart"})
    assert first_rule(stated, failure(3)) == RuleMatch(number=1, action=RuleAction.FAIL, why="exit code 3")
    assert first_rule(stated, failure(1)) == RuleMatch(number=2, action=RuleAction.CONTINUE, why="role worker")


def test_describe_names_the_rule_as_status_says_it() -> None:
    matched = first_rule(rules({"exit_codes": [3], "action": "fail"}), failure(3))
    assert matched is not None and matched.describe() == "rule 1 (exit code 3): fail"


@pytest.mark.parametrize("code", [1, 3, 137])
def test_no_rules_match_nothing(code: int) -> None:
    assert first_rule((), failure(code)) is None


def test_a_huge_line_is_searched_in_bounded_time() -> None:
    """RE2 has no catastrophic backtracking: the classic exponential pattern ends at once on a long line."""
    stated = rules({"log_pattern": r"(a+)+$", "action": "fail"})
    assert first_rule(stated, failure(1, tail=("a" * 4000 + "!",))) is None
