"""The supervisor's pure decisions: every branch of ``Decider.decide`` and the restart groups."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.api import validate_data
from launcher.supervision.decisions import Action, Decider, Exited, Requeued, Used
from launcher.supervision.status import State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

MWMS = {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "evaluator": {"replicas": 1}}
PSS = {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {"replicas": 1}}


def decider(roles: dict[str, Any], **fields: Any) -> Decider:
    return Decider.from_plan(api.plan(validate_data({"name": "job", "roles": roles, **fields})))


def decide(r: Decider, task: str, code: int, exited: dict[str, int] | None = None, used: int = 0):
    return r.decide(Exited(task, code, {task: code, **(exited or {})}, Used(restarts=used), "ValueError: bad input"))


def test_chief_exit_0_succeeds_under_chief_policy() -> None:
    assert decide(decider(MWMS), "job-chief-0", 0).action is Action.SUCCEED


def test_worker_0_decides_when_there_is_no_chief() -> None:
    r = decider({"worker": {"replicas": 2}})
    assert decide(r, "job-worker-0", 0).action is Action.SUCCEED
    assert decide(r, "job-worker-1", 0).action is Action.CONTINUE


def test_worker_exit_0_does_not_end_the_job_while_the_chief_runs() -> None:
    assert decide(decider(MWMS), "job-worker-1", 0).action is Action.CONTINUE


def test_all_workers_policy_waits_for_every_worker() -> None:
    r = decider(MWMS, success_policy="all-workers")
    assert decide(r, "job-chief-0", 0).action is Action.CONTINUE
    assert decide(r, "job-worker-1", 0, {"job-chief-0": 0, "job-worker-0": 0}).action is Action.SUCCEED
    assert decide(r, "job-chief-0", 0, {"job-worker-0": 0}).action is Action.CONTINUE


def test_never_fails_on_the_first_error_and_names_task_and_error() -> None:
    decision = decide(decider(MWMS, restart={"policy": "never"}), "job-worker-1", 1)
    assert decision.action is Action.FAIL
    assert "job-worker-1" in decision.message and "ValueError: bad input" in decision.message


@pytest.mark.parametrize("code", [1, 2, 127, 137, 143])
def test_on_failure_retries_every_non_zero_code(code: int) -> None:
    assert decide(decider(MWMS), "job-worker-0", code).action is Action.RESTART


@pytest.mark.parametrize(("code", "action"), [(1, Action.FAIL), (127, Action.FAIL), (128, Action.RESTART), (137, Action.RESTART)])
def test_exit_code_policy_retries_only_signal_exits(code: int, action: Action) -> None:
    decision = decide(decider(MWMS, restart={"policy": "exit-code"}), "job-worker-0", code)
    assert decision.action is action
    if action is Action.FAIL:
        assert "exit-code" in decision.message and "job-worker-0" in decision.message


def test_always_restarts_servers_that_exit_0_but_not_finished_workers() -> None:
    r = decider(PSS, restart={"policy": "always"})
    assert decide(r, "job-ps-0", 0).restart == ("job-chief-0", "job-worker-0", "job-worker-1", "job-ps-0")
    assert decide(r, "job-evaluator-0", 0).restart == ("job-evaluator-0",)
    assert decide(r, "job-worker-0", 0).action is Action.CONTINUE


def test_on_failure_lets_a_server_that_exits_0_stay_down() -> None:
    assert decide(decider(PSS), "job-ps-0", 0).action is Action.CONTINUE


def test_budget_exhausted_fails_with_task_and_last_error() -> None:
    r = decider(MWMS, restart={"policy": "on-failure", "max_restarts": 2})
    assert decide(r, "job-worker-1", 3, used=1).action is Action.RESTART
    decision = decide(r, "job-worker-1", 3, used=2)
    assert decision.action is Action.FAIL
    assert "job-worker-1" in decision.message
    assert "budget (2)" in decision.message and "ValueError: bad input" in decision.message


def test_zero_budget_fails_at_once() -> None:
    assert decide(decider(MWMS, restart={"max_restarts": 0}), "job-worker-0", 137).action is Action.FAIL


def test_mwms_gang_restarts_every_training_task_but_not_the_evaluator() -> None:
    r = decider(MWMS)
    for task in ("job-chief-0", "job-worker-0", "job-worker-1"):
        assert decide(r, task, 1).restart == ("job-chief-0", "job-worker-0", "job-worker-1")


def test_pss_worker_failure_restarts_that_worker_only() -> None:
    assert decide(decider(PSS), "job-worker-1", 137).restart == ("job-worker-1",)


@pytest.mark.parametrize("task", ["job-ps-0", "job-chief-0"])
def test_pss_ps_or_chief_failure_restarts_every_training_task(task: str) -> None:
    assert decide(decider(PSS), task, 137).restart == ("job-chief-0", "job-worker-0", "job-worker-1", "job-ps-0")


@pytest.mark.parametrize("roles", [MWMS, PSS])
def test_evaluator_failure_restarts_only_the_evaluator(roles: dict[str, Any]) -> None:
    assert decide(decider(roles), "job-evaluator-0", 1).restart == ("job-evaluator-0",)


def test_restart_message_counts_against_the_budget() -> None:
    decision = decide(decider(MWMS, restart={"max_restarts": 3}), "job-worker-0", 137, used=1)
    assert "restart 2/3" in decision.message and "job-worker-0" in decision.message


def test_exits_of_one_round_are_decided_root_cause_first() -> None:
    """Chief exits 1 (lost its peer) in the same poll round as the killed worker (137):
    under exit-code the 137 must restart the group, not the 1 fail the job."""
    spec = validate_data({"name": "ord", "roles": {"chief": {}, "worker": {"replicas": 1}},
                          "restart": {"policy": "exit-code", "max_restarts": 1}})
    plan = api.plan(spec, "local")
    runtime = ScriptedRuntime({"ord-chief-0": [1, 0], "ord-worker-0": [137, 0]})
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0)).run()
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1 and runtime.runs == {"ord-chief-0": 1, "ord-worker-0": 1}


@pytest.mark.parametrize("policy", ["never", "on-failure", "exit-code", "always"])
def test_a_preempted_exit_restarts_the_group_under_every_policy_without_the_restart_budget(policy: str) -> None:
    r = decider(MWMS, restart={"policy": policy, "max_restarts": 0, "max_preemptions": 2})
    decision = r.decide(Exited("job-worker-1", 143, {"job-worker-1": 143}, Used(0, preemptions=1)))
    assert decision.action is Action.RESTART and decision.preemption
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1")
    assert "preempted" in decision.message and "2/2" in decision.message


def test_past_its_own_budget_a_preemption_is_decided_as_a_failure() -> None:
    decision = decider(MWMS, restart={"max_restarts": 5, "max_preemptions": 1}).decide(
        Exited("job-worker-1", 143, {"job-worker-1": 143}, Used(2, preemptions=1)))
    assert decision.action is Action.RESTART and not decision.preemption and "restart 3/5" in decision.message
    decision = decider(MWMS, restart={"max_restarts": 0, "max_preemptions": 1}).decide(
        Exited("job-worker-1", 143, {"job-worker-1": 143}, Used(0, preemptions=1)))
    assert decision.action is Action.FAIL and "budget (0)" in decision.message


def test_a_failure_is_no_preemption_and_uses_the_restart_budget() -> None:
    r = decider(MWMS, restart={"max_restarts": 1, "max_preemptions": 100})
    assert not decide(r, "job-worker-1", 137).preemption
    assert decide(r, "job-worker-1", 137, used=1).action is Action.FAIL


def test_a_preempted_pss_worker_restarts_alone() -> None:
    decision = decider(PSS).decide(Exited("job-worker-0", 143, {"job-worker-0": 143}))
    assert (decision.action, decision.restart, decision.preemption) == (Action.RESTART, ("job-worker-0",), True)


@pytest.mark.parametrize("policy", ["never", "on-failure"])
def test_a_requeue_restarts_every_task_as_a_preemption_within_its_budget_then_fails(policy: str) -> None:
    r = decider(PSS, restart={"policy": policy, "max_restarts": 0, "max_preemptions": 2})
    decision = r.decide(Requeued(Used(restarts=5, preemptions=1)))
    assert decision.action is Action.RESTART and decision.preemption
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1", "job-ps-0", "job-evaluator-0")
    decision = r.decide(Requeued(Used(preemptions=2)))
    assert decision.action is Action.FAIL and "preempted 3 times, past restart.max_preemptions (2)" in decision.message


def test_a_large_groups_restart_names_its_first_tasks_and_counts_the_rest() -> None:
    """A thousand tasks' restart message stays one short line (it is in every status while the group restarts)."""
    r = decider({"chief": {"replicas": 1}, "worker": {"replicas": 999}})
    decision = decide(r, "job-worker-998", 143)
    assert len(decision.restart) == 1000
    assert "restarting job-chief-0, job-worker-0, job-worker-1 and 997 more tasks (" in decision.message
    assert len(decision.message) < 200
    assert "restarting job-chief-0, job-worker-0, job-worker-1 (" in decide(decider(MWMS), "job-worker-1", 1).message
