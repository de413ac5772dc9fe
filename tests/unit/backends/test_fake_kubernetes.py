"""The fake Kubernetes API's own semantics, where tfcluster's tests rely on them: the API server's checks, its
Job controller (with ``job_controller`` set: at once), what a deleted pod's process does. Its differences from a
real server are listed in ``tests/fakes/kubernetes_api.py``; ``tests/contract`` holds it to a real one."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fakes.kubernetes_api import CONTROLLER_UID_KEY, IGNORES_SIGTERM, ApiError, FakeKubernetes, OnSigterm
from helpers.k8s_specs import dry_run_for
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi
from launcher.backends.kubernetes.manifests import objects

JOB = {
    "metadata": {"name": "j"},
    "spec": {
        "completions": 1, "parallelism": 1, "backoffLimit": 0, "podReplacementPolicy": "Failed",
        "template": {"metadata": {}, "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 10,
                                              "containers": [{"name": "trainer", "image": "img"}]}},
    },
}


def job(**spec: object) -> dict:
    obj = copy.deepcopy(JOB)
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize(("change", "field"), [
    ({"template": None}, "spec.template: Required value"),
    ({"selector": {"matchLabels": {"a": "b"}}}, "spec.selector: Invalid value"),
])
def test_a_job_the_api_server_refuses(fake: FakeKubernetes, change: dict, field: str) -> None:
    obj = job(**change)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    with pytest.raises(ApiError, match=field) as raised:
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
    stored["spec"]["backoffLimit"] = 1  # mutable; the selector the server made is kept as it is
    assert batch.replace_namespaced_job("j", "default", stored, _preload_content=False).status == 200


def test_every_object_tfcluster_renders_is_admitted(fake: FakeKubernetes) -> None:
    spec = {"name": "all", "roles": {"worker": {"replicas": 3}}, "deadline_seconds": 60, "restart": {"policy": "exit-code"}}
    for obj in objects(dry_run_for(spec).files):
        plural = {"ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Service": "services", "Job": "jobs",
                  "NetworkPolicy": "networkpolicies", "PersistentVolumeClaim": "persistentvolumeclaims", "Role": "roles",
            "RoleBinding": "rolebindings", "PodGroup": "podgroups"}[obj["kind"]]
        fake.create(plural, "default", obj)
    task = fake.get("jobs", "all-worker-2")
    assert task["spec"]["suspend"] is True and task["spec"]["selector"] == {"matchLabels": {CONTROLLER_UID_KEY: task["metadata"]["uid"]}}
    fake.sync_jobs()
    assert [p["metadata"]["labels"][CONTROLLER_UID_KEY] for p in fake.list("pods")] == [
        fake.get("jobs", "all-supervisor")["metadata"]["uid"]]  # the tasks' Jobs are suspended: the supervisor starts them


@pytest.mark.parametrize(("behaviour", "after", "code"), [
    (OnSigterm(), 0, 143), (OnSigterm(seconds=10), 10, 143), (OnSigterm(seconds=11), 10, 137),
    (OnSigterm(seconds=3, code=1), 3, 1), (IGNORES_SIGTERM, 10, 137),
])
def test_a_deleted_pods_process_decides_its_exit_within_the_grace(fake: FakeKubernetes, behaviour: OnSigterm, after: int,
                                                                  code: int) -> None:
    fake.create("jobs", "default", job())
    [pod] = fake.start_pods("j")
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["name"] == "trainer"  # from the pod spec
    fake.on_sigterm["j"] = behaviour
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
    [pod] = fake.start_pods("j")
    fake.on_sigterm["j"] = IGNORES_SIGTERM
    fake.delete("pods", "default", pod, "Background", grace=2)
    fake.now += 2
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


@pytest.mark.parametrize(("behaviour", "code"), [(OnSigterm(seconds=1.5), 143), (IGNORES_SIGTERM, 137)])
def test_a_grace_0_deletion_still_gets_sigterm_and_the_kubelets_least_grace(fake: FakeKubernetes, behaviour: OnSigterm,
                                                                           code: int) -> None:
    """As a real kubelet (seen on .ci/k8s.sh's cluster): no crash, SIGTERM and 2 s before SIGKILL."""
    fake.create("jobs", "default", job())
    [pod] = fake.start_pods("j")
    fake.on_sigterm["j"] = behaviour
    fake.delete("pods", "default", pod, "Background", grace=0)
    fake.now += 1
    assert fake.get("pods", pod)["status"]["phase"] == "Running"
    fake.now += 1
    assert fake.get("pods", pod)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code


def test_the_job_controller_runs_a_suspended_job_once_resumed_and_never_replaces_its_pod(fake: FakeKubernetes) -> None:
    fake.job_controller = True
    api = KubeApi(client.ApiClient(client.Configuration(host=fake.url)))
    made = api.create(Kind.JOB, "default", job(suspend=True))
    assert fake.list("pods") == [] and "startTime" not in fake.get("jobs", "j")["status"]
    api.merge_patch_job("j", "default", {"spec": {"suspend": False}})
    [pod] = fake.list("pods")
    assert pod["metadata"]["labels"][CONTROLLER_UID_KEY] == made["metadata"]["uid"]
    assert pod["metadata"]["labels"]["job-name"] == "j" and fake.get("jobs", "j")["status"]["startTime"]
    fake.finish_pod(pod["metadata"]["name"], 1)
    failed = fake.get("jobs", "j")
    assert [c["type"] for c in failed["status"]["conditions"] if c["status"] == "True"] == ["FailureTarget", "Failed"]
    assert [p["metadata"]["name"] for p in fake.list("pods")] == [pod["metadata"]["name"]]  # backoffLimit 0: none new


@pytest.mark.parametrize(("limit", "policy", "pods_while_terminating"), [
    (1, "Failed", 1), (1, "TerminatingOrFailed", 2), (0, "Failed", 1),
])
def test_a_deleted_pod_is_replaced_within_the_backoff_limit_as_the_replacement_policy_says(
        fake: FakeKubernetes, limit: int, policy: str, pods_while_terminating: int) -> None:
    fake.create("jobs", "default", job(backoffLimit=limit, podReplacementPolicy=policy))
    [pod] = fake.start_pods("j")
    fake.on_sigterm["j"] = OnSigterm(seconds=5)
    fake.delete("pods", "default", pod, "Background")
    fake.reconcile("j")
    assert len(fake.list("pods")) == pods_while_terminating
    fake.now += 5
    fake.reconcile("j")
    live = [p for p in fake.list("pods") if p["status"]["phase"] == "Running"]
    assert len(live) == (1 if limit else 0)
    assert bool(fake.get("jobs", "j")["status"].get("conditions", [{}])[-1].get("type") == "Failed") is (limit == 0)
