"""The admission policy (k8s/admission-policy.yaml, which .ci/k8s.sh applies as the cluster's administrator) on the
real cluster: requests forged as a run's supervisor are refused, its own are admitted.

As the administrator, the test impersonates the ServiceAccount ``<run>-supervisor`` (``Impersonate-User``, as
``kubectl --as``) of a run whose params, ServiceAccount, Role and RoleBinding exist as ``up`` creates them (no pod
of the run's is started: the supervisor's requests are made by the test, server-side dry runs where that is
enough). RBAC lets every such request through (the Role grants Jobs ``create`` and pods ``delete`` in the whole
namespace); the policy refuses a Job of another run, of a foreign image, of another ServiceAccount, with a hostPath
volume, privilege escalation, an added capability or the node's network, and the deletion of another run's pod, and
admits the run's own Job, its start (unsuspended), its replacement (deleted, a fresh copy created) and the deletion
of its own pod. The namespace enforces the ``restricted`` Pod Security Standard, which
judges pods, not Jobs: a Job's refusal here is the policy's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helpers.k8s_e2e import admin_kubeconfig, image, namespace, run_name
from helpers.k8s_specs import manifests
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes import admission_policy
from launcher.plan import naming
from launcher.plan.planner import Plan

pytestmark = pytest.mark.e2e

#: The kinds ``up`` creates for the supervisor's rights and the policy's params (the rest are not needed here).
NEEDED = ("ConfigMap", "ServiceAccount", "Role", "RoleBinding")


def _client(user: str | None = None) -> Any:
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=admin_kubeconfig())
    if user is not None:
        api_client.set_default_header("Impersonate-User", user)
    return api_client


def _plan(name: str) -> Plan:
    spec = validate_data({"name": name, "image": image(), "roles": {"worker": {"replicas": 1}},
                          "kubernetes": {"namespace": namespace()}})  # its claim is never made: no pod of it runs
    return api.plan(spec, "k8s", api.new_run_id())


def _pending_pod(name: str, cluster: str) -> dict[str, Any]:
    """A pod of ``cluster`` (its label) that the restricted namespace admits and no node runs (its node selector
    matches none)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {naming.LABEL_MANAGED: naming.MANAGER, naming.LABEL_CLUSTER: cluster}},
            "spec": {"nodeSelector": {"tfcluster.io/e2e-no-such-node": "true"}, "automountServiceAccountToken": False,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "idle", "image": image(), "securityContext": {
                         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


@pytest.fixture
def run() -> Iterator[tuple[Plan, str]]:
    """A run's params and supervisor rights as ``up`` creates them, a pending pod of it and one of another run;
    all removed after the test."""
    from kubernetes import client, utils

    admin = _client()
    core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    binding = client.AdmissionregistrationV1Api(admin).list_validating_admission_policy_binding()
    if admission_policy.POLICY not in [b.metadata.name for b in binding.items]:
        pytest.fail(f"the test cluster has no {admission_policy.POLICY} binding: .ci/k8s.sh applies "
                    f"k8s/{admission_policy.FILE}", pytrace=False)
    plan, other = _plan(run_name("vap")), run_name("vap-other")
    made = [o for o in manifests(plan) if o["kind"] in NEEDED]
    pods = {plan.name: f"{plan.name}-pod", other: f"{other}-pod"}
    try:
        for obj in made:
            utils.create_from_dict(admin, obj, namespace=namespace())
        for cluster, pod in pods.items():
            core.create_namespaced_pod(namespace(), _pending_pod(pod, cluster))
        yield plan, other
    finally:
        for pod in pods.values():
            _gone(lambda n=pod: core.delete_namespaced_pod(n, namespace(), grace_period_seconds=0))
        deletes: dict[str, Callable[[str, str], Any]] = {
            "ConfigMap": core.delete_namespaced_config_map, "ServiceAccount": core.delete_namespaced_service_account,
            "Role": rbac.delete_namespaced_role, "RoleBinding": rbac.delete_namespaced_role_binding}
        for obj in made:
            _gone(lambda o=obj: deletes[o["kind"]](o["metadata"]["name"], namespace()))


def _gone(delete: Callable[[], Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        delete()
    except ApiException as exc:
        if exc.status != 404:
            raise


def _as_supervisor(plan: Plan) -> Any:
    return _client(f"system:serviceaccount:{namespace()}:{naming.supervisor_name(plan.name)}")


def _task_job(plan: Plan) -> dict[str, Any]:
    return next(o for o in manifests(plan) if o["kind"] == "Job" and naming.LABEL_CLUSTER in o["metadata"]["labels"])


def _refusal(request: Callable[[], Any]) -> str:
    """The API server's refusal of ``request`` (its message), or "" when it admits it."""
    from kubernetes.client.exceptions import ApiException

    try:
        request()
    except ApiException as exc:
        return f"{exc.status} {json.loads(exc.body).get('message', '')}"
    return ""


def _other_run(job: dict[str, Any], other: str) -> None:
    job["metadata"]["labels"][naming.LABEL_CLUSTER] = other
    job["spec"]["template"]["metadata"]["labels"][naming.LABEL_CLUSTER] = other


def _host_path(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/etc"}})


def _foreign_image(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/not-the-run:1"


def _other_account(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["serviceAccountName"] = "default"


def _escalation(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True


def _capability(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_ADMIN"]}


def _host_network(job: dict[str, Any], _: str) -> None:
    job["spec"]["template"]["spec"]["hostNetwork"] = True


FORGERIES = {"another run's label": (_other_run, "of its own run"), "a hostPath volume": (_host_path, "hostPath"),
             "a foreign image": (_foreign_image, "only its run's images"),
             "another ServiceAccount": (_other_account, "ServiceAccount"),
             # (a privileged container: the test cluster's API server refuses it itself, --allow-privileged=false)
             "privilege escalation": (_escalation, "privilege escalation"),
             "an added capability": (_capability, "add capabilities"), "the node's network": (_host_network, "network")}


def test_supervisor_creates_only_its_runs_jobs(run: tuple[Plan, str]) -> None:
    from kubernetes import client

    plan, other = run
    jobs = client.BatchV1Api(_as_supervisor(plan))
    own = _task_job(plan)
    assert _refusal(lambda: jobs.create_namespaced_job(namespace(), own, dry_run="All")) == ""
    for what, (forge, words) in FORGERIES.items():
        job = copy.deepcopy(own)
        forge(job, other)
        refusal = _refusal(lambda j=job: jobs.create_namespaced_job(namespace(), j, dry_run="All"))
        assert admission_policy.POLICY in refusal and words in refusal, (what, refusal)


def test_supervisor_deletes_only_its_runs_pods(run: tuple[Plan, str]) -> None:
    from kubernetes import client

    plan, other = run
    core = client.CoreV1Api(_as_supervisor(plan))
    assert _refusal(lambda: core.delete_namespaced_pod(f"{plan.name}-pod", namespace(), dry_run="All")) == ""
    refusal = _refusal(lambda: core.delete_namespaced_pod(f"{other}-pod", namespace(), dry_run="All"))
    assert admission_policy.POLICY in refusal and "delete only" in refusal, refusal
    # the same request as the administrator: the refusal is the policy's, for the supervisor alone
    admin = client.CoreV1Api(_client())
    assert _refusal(lambda: admin.delete_namespaced_pod(f"{other}-pod", namespace(), dry_run="All")) == ""


@pytest.mark.parametrize("policy", [admission_policy.POLICY, admission_policy.DELETIONS])
def test_policy_type_checks_against_the_kinds_it_matches(policy: str) -> None:
    """The API server type-checks each policy's expressions against the schemas of the kinds it matches (Jobs;
    Jobs and pods): no warning."""
    from kubernetes import client

    found = client.AdmissionregistrationV1Api(_client()).read_validating_admission_policy(policy)
    type_checking = found.status.type_checking if found.status else None
    assert type_checking is not None and not type_checking.expression_warnings, type_checking


def test_supervisor_starts_and_replaces_its_runs_job(run: tuple[Plan, str]) -> None:
    """What the supervisor does to a task's Job (``runtime.KubernetesRuntime.start``): unsuspend it (a merge patch:
    an UPDATE the policy judges), delete it and create a fresh copy; all admitted."""
    from kubernetes import client

    from launcher.backends.kubernetes.runtime import fresh_copy

    plan, _ = run
    own = _task_job(plan)
    created = client.BatchV1Api(_client()).create_namespaced_job(namespace(), own)  # as `up` does, suspended
    jobs = client.BatchV1Api(_as_supervisor(plan))
    name = own["metadata"]["name"]
    try:
        assert _refusal(lambda: jobs.patch_namespaced_job(name, namespace(), {"spec": {"suspend": False}}, dry_run="All",
                                                          _content_type="application/merge-patch+json")) == ""
        assert _refusal(lambda: jobs.delete_namespaced_job(name, namespace(), dry_run="All")) == ""
        copy_ = fresh_copy(client.ApiClient().sanitize_for_serialization(created))
        copy_["metadata"]["name"] = f"{name}-copy"
        assert _refusal(lambda: jobs.create_namespaced_job(namespace(), copy_, dry_run="All")) == ""
    finally:
        _gone(lambda: client.BatchV1Api(_client()).delete_namespaced_job(name, namespace(),
                                                                          propagation_policy="Background"))
