"""The failure rules on Kubernetes against the fake API: a ``fail`` rule on exit codes is the Job controller's
(``podFailurePolicy``); one on a log pattern or roles is the launcher's watch's, which ends the run naming it."""

from __future__ import annotations

from typing import Any

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, rbac_allowed, rbac_used
from helpers.k8s_specs import dry_run_for
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.supervision.status import State

RULES = [
    {"exit_codes": [3], "action": "fail"},
    {"log_pattern": "CUDA_ERROR_ECC", "action": "fail"},
    {"roles": ["evaluator"], "action": "continue"},
]


def launch(fake: FakeKubernetes, rules: list[dict[str, Any]] = RULES) -> KubernetesBackend:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "fr", "roles": {"chief": {}, "worker": {"replicas": 2}, "evaluator": {}},
                                "restart": {"max_restarts": 3, "rules": rules}}))
    for job in ("fr-chief", "fr-worker", "fr-evaluator"):
        fake.start_pods(job)
    return backend


def pod_of(fake: FakeKubernetes, task: str) -> str:
    return next(name for (plural, _, name) in fake.objects if plural == "pods" and name.startswith(task + "-"))


def fail(fake: FakeKubernetes, task: str, code: int, log: str = "", reason: str = "") -> None:
    pod = pod_of(fake, task)
    fake.pod_logs["default", pod] = log
    fake.finish_pod(pod, code, reason=reason)
    fake.reconcile(task.rsplit("-", 1)[0])


def test_a_log_pattern_fail_rule_ends_the_run_naming_the_rule(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    fail(fake, "fr-worker-1", 1, "epoch 1\nRuntimeError: CUDA_ERROR_ECC on device 0\n")
    actions = backend.supervision_round("fr")
    assert actions[0] == "failure rules: failed: rule 2 (log pattern 'CUDA_ERROR_ECC'): fail: task fr-worker-1 exited with code 1"
    assert actions[1:] == ["failure rules: ended Job fr-chief (its deadline is now)",
                           "failure rules: ended Job fr-worker (its deadline is now)"]
    fake.now += 2  # past the deadline the watch set (at least 1 s: the API's least)
    for job in ("fr-chief", "fr-worker"):
        fake.reconcile(job)
    status = backend.describe("fr")
    assert status.state is State.FAILED
    assert status.message.startswith("failed: rule 2 (log pattern 'CUDA_ERROR_ECC'): fail: task fr-worker-1"), status.message
    assert backend.supervision_round("fr")[:1] != actions[:1]  # judged once
    assert rbac_used(fake) <= rbac_allowed()  # the launcher's Role allows what the watch did (logs, Jobs, ConfigMap)


def test_an_exit_code_fail_rule_is_the_job_controllers_and_the_watch_leaves_it(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    fail(fake, "fr-worker-0", 3)
    status = backend.describe("fr")
    assert status.state is State.FAILED and "FailJob" in status.message  # podFailurePolicy, rendered from rule 1
    assert not [a for a in backend.supervision_round("fr") if a.startswith("failure rules")]


def test_a_failure_no_rule_matches_is_left_to_the_job_controller(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    fail(fake, "fr-worker-0", 1, "ValueError: something else\n")
    assert not [a for a in backend.supervision_round("fr") if a.startswith("failure rules")]
    assert backend.describe("fr").state is not State.FAILED


def test_a_continue_rule_the_engine_cannot_enforce_is_said_once(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    fail(fake, "fr-evaluator-0", 1, "oops\n")
    said = [a for a in backend.supervision_round("fr") if a.startswith("failure rules")]
    assert said == ["failure rules: task fr-evaluator-0 exited with code 1: rule 3 (role evaluator): continue is not "
                    "enforced on Kubernetes (the Job controller replaces the pod under its budget)"]
    assert not [a for a in backend.supervision_round("fr") if a.startswith("failure rules")]


def test_an_oom_kill_matches_a_sigkill_rule_and_says_so(fake: FakeKubernetes) -> None:
    backend = launch(fake, [{"signals": ["SIGKILL"], "log_pattern": ".", "action": "fail"}])
    fail(fake, "fr-chief-0", 137, "allocating\n", reason="OOMKilled")
    actions = backend.supervision_round("fr")
    assert actions[0].startswith("failure rules: failed: rule 1 (signal SIGKILL, OOM-killed, log pattern '.'): fail: "
                                 "task fr-chief-0 exited with code 137 (OOM-killed)"), actions


def test_detached_without_a_deadline_warns_when_a_rule_needs_the_watch() -> None:
    pss = {"name": "p", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}},
           "command": ["python", "train.py"], "kubernetes": {"supervisor": False}}  # nothing else for the watch to do
    assert not dry_run_for({**pss, "restart": {"rules": [RULES[0]]}}).supervised_only_while_watched  # podFailurePolicy
    assert dry_run_for({**pss, "restart": {"rules": RULES}}).supervised_only_while_watched
