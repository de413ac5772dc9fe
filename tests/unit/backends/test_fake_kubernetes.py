"""The fake Kubernetes API's own semantics, where tfcluster's tests rely on them: the API server's checks,
the ``successPolicy`` grammar, what a deleted pod's process does. Its differences from a real server are
listed in ``tests/fakes/kubernetes_api.py``."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fakes.kubernetes_api import IGNORES_SIGTERM, ApiError, FakeKubernetes, OnSigterm
from fakes.kubernetes_checks import success_indexes, success_rule_met
from helpers.k8s_specs import dry_run_for
from launcher.backends.kubernetes.manifests import objects

JOB = {
    "metadata": {"name": "j"},
    "spec": {
        "completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1, "maxFailedIndexes": 0,
        "podReplacementPolicy": "Failed",
        "template": {"metadata": {}, "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 10,
                                              "containers": [{"name": "trainer", "image": "img"}]}},
    },
}


def job(**spec: object) -> dict:
    obj = copy.deepcopy(JOB)
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize(("text", "indexes"), [("0", {0}), ("0,2-4", {0, 2, 3, 4}), ("1-1,3", {1, 3})])
def test_succeeded_indexes_grammar(text: str, indexes: set[int]) -> None:
    assert success_indexes(text, 5) == indexes


@pytest.mark.parametrize("text", ["", "a", "0-", "-1", "2,1", "1-0", "0,0", "0-2,2", "5", " 1", "1,"])
def test_succeeded_indexes_the_api_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        success_indexes(text, 5)


@pytest.mark.parametrize(("rule", "done", "met"), [
    ({"succeededIndexes": "1-4", "succeededCount": 3}, {1, 3, 5}, False),  # the API reference's example
    ({"succeededIndexes": "1-4", "succeededCount": 3}, {1, 3, 4}, True),
    ({"succeededIndexes": "0,2"}, {0, 1}, False),
    ({"succeededIndexes": "0,2"}, {0, 2}, True),
    ({"succeededCount": 2}, {0, 5}, True),
    ({"succeededCount": 2}, {5}, False),
])
def test_success_rules(rule: dict, done: set[int], met: bool) -> None:
    assert success_rule_met(rule, done, 6) is met


@pytest.mark.parametrize(("change", "field"), [
    ({"template": None}, "spec.template: Required value"),
    ({"completions": None}, "spec.completions: Required value"),
    ({"successPolicy": {"rules": [{}]}}, "spec.successPolicy.rules[0]: Required value"),
    ({"successPolicy": {"rules": [{"succeededIndexes": "0-3"}]}}, "spec.successPolicy.rules[0].succeededIndexes: Invalid value"),
    ({"successPolicy": {"rules": [{"succeededIndexes": "0", "succeededCount": 2}]}}, "rules[0].succeededCount: Invalid value"),
    ({"successPolicy": {"rules": [{"succeededCount": 1}] * 21}}, "spec.successPolicy.rules: Too many"),
    ({"completionMode": "NonIndexed"}, "spec.backoffLimitPerIndex: Invalid value: requires Indexed"),
    ({"podFailurePolicy": {"rules": []}, "podReplacementPolicy": "TerminatingOrFailed"}, "spec.podReplacementPolicy"),
    ({"activeDeadlineSeconds": -1}, "spec.activeDeadlineSeconds: Invalid value"),
])
def test_a_job_the_api_server_refuses(fake: FakeKubernetes, change: dict, field: str) -> None:
    obj = job(**change)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    with pytest.raises(ApiError, match=field.replace("[", r"\[").replace("]", r"\]")) as raised:
        fake.create("jobs", "default", obj)
    assert raised.value.code == 422 and not fake.objects


@pytest.mark.parametrize(("pod_spec", "field"), [
    ({"restartPolicy": "Always", "containers": [{"name": "t", "image": "i"}]}, "restartPolicy: Unsupported value"),
    ({"restartPolicy": "Never", "containers": []}, "containers: Required value"),
    ({"restartPolicy": "Never", "containers": [{"name": "t"}]}, r"containers\[0\].image: Required value"),
    ({"restartPolicy": "Never", "containers": [{"name": "t", "image": "i"}], "initContainers": [{"name": "t", "image": "i"}]},
     "Duplicate value"),
])
def test_a_pod_template_the_api_server_refuses(fake: FakeKubernetes, pod_spec: dict, field: str) -> None:
    obj = job()
    obj["spec"]["template"]["spec"] = pod_spec
    with pytest.raises(ApiError, match=field):
        fake.create("jobs", "default", obj)


def test_a_jobs_pod_template_is_immutable_over_http(fake: FakeKubernetes) -> None:
    batch = client.BatchV1Api(client.ApiClient(client.Configuration(host=fake.url)))
    created = batch.create_namespaced_job("default", job(), _preload_content=False)
    stored = fake.get("jobs", "j")
    assert created.status == 201 and stored is not None
    stored["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    with pytest.raises(ApiException) as raised:
        batch.replace_namespaced_job("j", "default", stored, _preload_content=False)
    assert raised.value.status == 422 and "spec.template: Invalid value: field is immutable" in str(raised.value.body)
    stored = fake.get("jobs", "j")
    stored["spec"]["parallelism"] = 1  # mutable
    assert batch.replace_namespaced_job("j", "default", stored, _preload_content=False).status == 200


def test_every_object_tfcluster_renders_is_admitted(fake: FakeKubernetes) -> None:
    spec = {"name": "all", "roles": {"worker": {"replicas": 3}}, "deadline_seconds": 60, "restart": {"policy": "exit-code"}}
    for obj in objects(dry_run_for(spec).files):
        plural = {"ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Service": "services", "Job": "jobs",
                  "NetworkPolicy": "networkpolicies", "PersistentVolumeClaim": "persistentvolumeclaims", "Role": "roles",
            "RoleBinding": "rolebindings"}[obj["kind"]]
        fake.create(plural, "default", obj)
    assert fake.get("jobs", "all-worker")["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}


@pytest.mark.parametrize(("behaviour", "after", "code"), [
    (OnSigterm(), 0, 143), (OnSigterm(seconds=10), 10, 143), (OnSigterm(seconds=11), 10, 137),
    (OnSigterm(seconds=3, code=1), 3, 1), (IGNORES_SIGTERM, 10, 137),
])
def test_a_deleted_pods_process_decides_its_exit_within_the_grace(fake: FakeKubernetes, behaviour: OnSigterm, after: int,
                                                                  code: int) -> None:
    fake.create("jobs", "default", job())
    pod = fake.start_pods("j")[1]
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["name"] == "trainer"  # from the pod spec
    fake.on_sigterm["j-1"] = behaviour
    fake.delete("pods", "default", pod, "Background")  # the template's grace: 10 s
    if after:
        fake.now += after - 0.5
        assert fake.get("pods", pod)["status"]["phase"] == "Running"
        fake.now += 0.5
    terminated = fake.get("pods", pod)["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == code
    fake.now += 1
    assert fake.get("pods", pod) is not None  # the Job controller has not counted it yet
    fake.reconcile("j")
    fake.now += 1
    assert fake.get("pods", pod) is None


def test_the_grace_of_the_delete_request_overrides_the_pods(fake: FakeKubernetes) -> None:
    fake.create("jobs", "default", job())
    pod = fake.start_pods("j")[0]
    fake.on_sigterm["j-0"] = IGNORES_SIGTERM
    fake.delete("pods", "default", pod, "Background", grace=2)
    fake.now += 2
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


@pytest.mark.parametrize(("behaviour", "code"), [(OnSigterm(seconds=1.5), 143), (IGNORES_SIGTERM, 137)])
def test_a_grace_0_deletion_still_gets_sigterm_and_the_kubelets_least_grace(fake: FakeKubernetes, behaviour: OnSigterm,
                                                                           code: int) -> None:
    """As a real kubelet (seen on .ci/k8s.sh's cluster): no crash, SIGTERM and 2 s before SIGKILL."""
    fake.create("jobs", "default", job())
    pod = fake.start_pods("j")[0]
    fake.on_sigterm["j-0"] = behaviour
    fake.delete("pods", "default", pod, "Background", grace=0)
    fake.now += 1
    assert fake.get("pods", pod)["status"]["phase"] == "Running"
    fake.now += 1
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
