"""The failure rules (spec ``restart.rules``) as the one supervisor applies them: ``Rules.decide`` and the loop
over a scripted runtime."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.backends.lines import MAX_LINE_BYTES
from launcher.plan.policy import LOG_LINE_CHARS
from launcher.spec.models import LOG_TAIL_LINES
from launcher.supervision.rules import Action, Exited, Rules, Used
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

ROLES = {"chief": {}, "worker": {"replicas": 2}, "evaluator": {}}
RULES = [
    {"exit_codes": [3], "action": "fail"},
    {"log_pattern": "CUDA_ERROR_ECC", "action": "restart"},
    {"roles": ["evaluator"], "action": "continue"},
]


def plan(restart: dict[str, Any]) -> Any:
    return api.plan(api.validate_data({"name": "job", "roles": ROLES, "restart": restart}))


def supervise(runtime: ScriptedRuntime, restart: dict[str, Any]) -> JobStatus:
    return Supervisor(plan(restart), runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()


def test_exit_3_fails_at_once_naming_the_rule_with_budget_left() -> None:
    decision = Rules.from_plan(plan({"max_restarts": 5, "rules": RULES})).decide(
        Exited("job-worker-1", 3, {"job-worker-1": 3}, Used(), "ValueError: bad input"))
    assert decision.action is Action.FAIL
    assert decision.message.startswith("failed: rule 1 (exit code 3): fail: task job-worker-1 exited with code 3")


def test_a_restart_rule_restarts_even_under_policy_never_within_max_restarts() -> None:
    rules = Rules.from_plan(plan({"policy": "never", "max_restarts": 1, "rules": RULES}))
    tail = ("step 9", "RuntimeError: CUDA_ERROR_ECC")
    decision = rules.decide(Exited("job-worker-0", 1, {"job-worker-0": 1}, Used(), "x", log_tail=tail))
    assert decision.action is Action.RESTART and "rule 2 (log pattern 'CUDA_ERROR_ECC'): restart" in decision.message
    assert rules.decide(Exited("job-worker-0", 1, {"job-worker-0": 1}, Used(1), "x", log_tail=tail)).action is Action.FAIL
    assert rules.decide(Exited("job-worker-0", 1, {"job-worker-0": 1}, Used(), "x")).action is Action.FAIL  # no match: never


def test_continue_on_a_task_the_success_needs_fails_saying_why() -> None:
    rules = Rules.from_plan(plan({"rules": [{"roles": ["chief", "evaluator"], "action": "continue"}]}))
    decision = rules.decide(Exited("job-chief-0", 1, {"job-chief-0": 1}, Used(), "x"))
    assert decision.action is Action.FAIL and "success needs task job-chief-0" in decision.message
    assert rules.decide(Exited("job-evaluator-0", 1, {"job-evaluator-0": 1}, Used(), "x")).action is Action.CONTINUE


def test_no_rule_matched_keeps_the_policy() -> None:
    rules = Rules.from_plan(plan({"rules": RULES}))
    assert rules.decide(Exited("job-worker-0", 1, {"job-worker-0": 1}, Used(), "x")).action is Action.RESTART


def test_supervised_exit_3_fails_the_job_at_once_and_restarts_nothing() -> None:
    runtime = ScriptedRuntime({"job-worker-1": [(2, 3)]})
    status = supervise(runtime, {"max_restarts": 5, "rules": RULES})
    assert status.state is State.FAILED
    assert status.message.startswith("failed: rule 1 (exit code 3): fail")
    assert status.restarts == 0 and all(run == 0 for run in runtime.runs.values())


def test_supervised_evaluator_failure_continues_without_restarting_training() -> None:
    runtime = ScriptedRuntime({"job-evaluator-0": [(1, 1)], "job-chief-0": [(6, 0)]})
    status = supervise(runtime, {"max_restarts": 5, "rules": RULES})
    assert status.state is State.SUCCEEDED and status.restarts == 0
    assert all(run == 0 for run in runtime.runs.values())
    evaluator = {t.name: t for t in status.tasks}["job-evaluator-0"]
    assert evaluator.state is State.FAILED and evaluator.exit_code == 1


def test_supervised_log_pattern_reads_the_failed_tasks_last_lines() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [(1, 1), (1, 3)]},
                              output={"job-worker-0": ["epoch 1", "RuntimeError: CUDA_ERROR_ECC on device 0"]})
    status = supervise(runtime, {"policy": "never", "max_restarts": 5, "rules": RULES})  # only the rule restarts
    assert status.restarts == 1 and runtime.runs["job-worker-0"] == 1
    assert status.state is State.FAILED and status.message.startswith("failed: rule 1 (exit code 3)")


class OomRuntime(ScriptedRuntime):
    """A scripted runtime whose engine reports the tasks in ``oom`` as ended by the OOM killer."""

    def __init__(self, *args: Any, oom: set[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.oom = oom

    def oom_killed(self, task: Any) -> bool:
        return task.name in self.oom


def test_supervised_oom_kill_the_engine_reports_matches_sigkill_and_says_so() -> None:
    runtime = OomRuntime({"job-worker-0": [(1, 137)]}, oom={"job-worker-0"})
    status = supervise(runtime, {"rules": [{"signals": ["SIGKILL"], "action": "fail"}]})
    assert status.state is State.FAILED
    assert status.message.startswith("failed: rule 1 (signal SIGKILL, OOM-killed): fail: task job-worker-0 exited "
                                     "with code 137 (OOM-killed)"), status.message


def test_the_tail_the_rules_read_is_bounded_per_task_and_a_long_lines_start_still_matches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's tail is at most ``LOG_TAIL_LINES`` lines of ``LOG_LINE_CHARS``: what a log pattern reads of it."""
    tails: list[tuple[str, ...]] = []
    decide = Rules.decide

    def recording(self: Rules, *args: Any, **kwargs: Any) -> Any:
        tails.extend(ended.log_tail for ended in args if isinstance(ended, Exited))
        return decide(self, *args, **kwargs)

    monkeypatch.setattr(Rules, "decide", recording)
    long = "x" * MAX_LINE_BYTES
    lines = [long] * (2 * LOG_TAIL_LINES) + ["RuntimeError: CUDA_ERROR_ECC " + long]
    runtime = ScriptedRuntime({"job-worker-0": [(1, 1), (1, 3)]}, output={"job-worker-0": lines})
    status = supervise(runtime, {"policy": "never", "max_restarts": 5, "rules": RULES})
    assert status.restarts == 1  # the rule matched the start of the long last line
    assert len(tails[0]) == LOG_TAIL_LINES  # the first run printed them
    assert max(sum(map(len, tail)) for tail in tails) <= LOG_TAIL_LINES * LOG_LINE_CHARS
