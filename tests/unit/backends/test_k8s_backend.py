"""The Kubernetes backend through the real ``kubernetes`` client over HTTP, against the stateful fake API server.

The fake stores what the client sends; the tests act as the Job controller
(``FakeKubernetes.reconcile``, a model of the documented Job semantics) and
the kubelet (``finish_pod``), and move the fake's clock (``fake.now``), which
lets deleted pods exit as their processes would and deletions complete. What
only a real cluster shows (scheduling, DNS, the real controller's timing) is
in tests/e2e/test_k8s_e2e.py.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from fakes.kubernetes_api import TOKEN_PATH, FakeKubernetes, OnSigterm
from helpers.boards import free_port
from helpers.k8s_fake import backend_for, fail_running_pods, kubeconfig_for, pod_of, rbac_allowed, rbac_used, settled
from helpers.k8s_specs import DEMO, dry_run_for, manifests, plan_for
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.backends.kubernetes.cluster_state import ConfigMapStore, planned_again
from launcher.backends.kubernetes.follow import follow_task
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.backends.kubernetes.runtime import KubernetesRuntime, fresh_copy
from launcher.backends.kubernetes.supervisor_objects import BACKOFF_LIMIT
from launcher.backends.kubernetes.tensorboard import BoardRun, checked_board, shared_board
from launcher.cli import registry
from launcher.cli.commands import main
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.supervision.status import JobStatus, State, SupervisorState, TaskStatus
from launcher.worker.stack_server import serve_stacks

PSS = {"name": "pss", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}}}
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp")

#: A ConfigMap a previous run of cluster demo left (our labels): replaced, not refused.
OUR_CONFIG_MAP = {"metadata": {"name": "demo-tfconfig", "labels": naming.labels("demo", "old")}, "data": {}}


def pods(fake: FakeKubernetes, prefix: str) -> list[str]:
    return sorted(name for (plural, _, name) in fake.objects if plural == "pods" and name.startswith(prefix))


def running(fake: FakeKubernetes, task: str) -> str:
    """The current pod of ``task`` (e.g. demo-worker-1)."""
    return pod_of(fake, task)


def start_all(fake: FakeKubernetes, *tasks: str, namespace: str = "default") -> None:
    """The tasks started as their supervisor starts them: each task's Job let run (it was applied suspended)."""
    for task in tasks:
        fake.patch("jobs", namespace, task, {"spec": {"suspend": False}})
        fake.start_pods(task, namespace)


def as_applied(job: dict) -> dict:
    """A stored Job without the selector and the pod labels the API server added to it (``runtime.fresh_copy``)."""
    copy = fresh_copy(job)
    spec = {k: v for k, v in copy["spec"].items() if k != "suspend"}
    if "suspend" in job["spec"]:
        spec["suspend"] = job["spec"]["suspend"]
    return {**copy, "metadata": job["metadata"], "spec": spec}


def test_submit_applies_exactly_the_planned_manifests(fake: FakeKubernetes) -> None:
    plan = plan_for(DEMO, "run-1")
    backend = backend_for(fake, namespace="team-a")
    backend.submit(KubernetesBackend.dry_run(plan))
    assert backend.describe("demo").state is State.PENDING
    expected = manifests(plan)
    assert len(fake.objects) == len(expected)
    plurals = {"ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Service": "services",
               "NetworkPolicy": "networkpolicies", "PersistentVolumeClaim": "persistentvolumeclaims", "Job": "jobs",
               "Role": "roles", "RoleBinding": "rolebindings", "PodGroup": "podgroups"}
    for obj in expected:
        stored = fake.get(plurals[obj["kind"]], obj["metadata"]["name"], "team-a")
        assert stored is not None, obj["kind"]
        for key in SERVER_FIELDS:
            del stored["metadata"][key]
        stored.pop("status", None)
        if obj["kind"] == "Job":
            stored = as_applied(stored)
        moved = {**obj, "metadata": {**obj["metadata"], "namespace": "team-a"}}
        if naming.LABEL_SUPERVISOR in obj["metadata"]["labels"]:  # the one field a file cannot say: the owner's uid
            owner = fake.get("configmaps", naming.config_map_name("demo"), "team-a")["metadata"]["uid"]
            moved["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": naming.config_map_name("demo"), "uid": owner}]
        if obj["kind"] == "RoleBinding":  # the supervisor's account is where the run went, not the spec's namespace
            moved["subjects"] = [{**subject, "namespace": "team-a"} for subject in obj["subjects"]]
        assert stored == moved


def test_the_garbage_collector_removes_the_supervisor_with_the_runs_config_map(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    supervisor = naming.supervisor_name("demo")
    for plural in ("serviceaccounts", "roles", "rolebindings", "jobs"):
        assert fake.get(plural, supervisor) is not None, plural
    fake.delete("configmaps", "default", naming.config_map_name("demo"), "Background")
    for plural in ("serviceaccounts", "roles", "rolebindings", "jobs"):
        assert fake.get(plural, supervisor) is None, plural


def test_a_backend_without_namespace_follows_the_spec_namespace(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "ns", "roles": {"worker": {"replicas": 1}}, "kubernetes": {"namespace": "ml"}}))
    assert fake.get("jobs", "ns-worker-0", "ml") is not None
    assert backend.describe("ns").state is State.PENDING


def test_down_volumes_deletes_only_what_tfcluster_created(fake: FakeKubernetes) -> None:
    """The spec's existing claim, and an object that only names the cluster in a label, are not tfcluster's."""
    own_claim = {"metadata": {"name": "datasets"}, "spec": {"accessModes": ["ReadWriteMany"]}}
    lookalike = {"metadata": {"name": "notes", "labels": {naming.LABEL_CLUSTER: "keep"}}, "data": {}}
    fake.create("persistentvolumeclaims", "default", own_claim)
    fake.create("configmaps", "default", lookalike)
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "keep", "roles": {"worker": {"replicas": 1}},
                                "kubernetes": {"volume_claim": {"name": "datasets"}}}))
    backend.cancel("keep", volumes=True)
    fake.now += 1  # Foreground deletion: the Jobs go once their pods are gone
    assert sorted(key[0] for key in fake.objects) == ["configmaps", "persistentvolumeclaims"]
    assert fake.get("persistentvolumeclaims", "datasets") is not None and fake.get("configmaps", "notes") is not None


def test_down_waits_for_pods_that_are_saving_and_a_launch_meanwhile_is_refused(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief-0", "demo-worker-0", "demo-worker-1")
    fake.on_sigterm["demo-chief-0"] = OnSigterm(seconds=20)  # its checkpoint takes 20 s to write
    backend.cancel("demo")
    with pytest.raises(LaunchError, match="still shutting down, retry in a few seconds"):
        backend.submit(dry_run_for(DEMO))
    fake.now += 10
    assert fake.get("jobs", "demo-worker-0") is None and fake.get("jobs", "demo-chief-0")["metadata"]["deletionTimestamp"]
    fake.now += 10
    assert backend.describe("demo") is None
    backend.submit(dry_run_for(DEMO))


def launch_pss_until_chief_succeeds(fake: FakeKubernetes, backend: KubernetesBackend, spec: dict = PSS) -> None:
    backend.submit(dry_run_for(spec))
    start_all(fake, "pss-chief", "pss-worker", "pss-ps", "pss-evaluator")
    fake.finish_pod(running(fake, "pss-chief-0"), 0)
    fake.reconcile("pss-chief")


def test_failed_launch_removes_what_it_created_and_keeps_an_existing_claim(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    fake.create("persistentvolumeclaims", "default", {"metadata": {"name": "demo-checkpoints"}, "spec": {"accessModes": ["ReadWriteMany"]}})
    fake.create("configmaps", "default", OUR_CONFIG_MAP)
    fake.fail_next("POST", "jobs", 403)
    with pytest.raises(LaunchError, match="cannot create Job demo-chief-0: 403 Forbidden"):
        backend.submit(dry_run_for(DEMO))
    assert sorted(key[0] for key in fake.objects) == ["configmaps", "persistentvolumeclaims"]
    assert fake.get("persistentvolumeclaims", "demo-checkpoints")["spec"] == {"accessModes": ["ReadWriteMany"]}
    backend.submit(dry_run_for(DEMO))  # the leftover ConfigMap is replaced, the claim kept
    assert "cluster.json" in fake.get("configmaps", "demo-tfconfig")["data"]
    assert fake.get("persistentvolumeclaims", "demo-checkpoints")["spec"] == {"accessModes": ["ReadWriteMany"]}


OWN_ACCOUNT = {
    "name": "own",
    "command": ["python", "train.py"],
    "roles": {"worker": {"replicas": 2}},
    "kubernetes": {
        "service_account": "trainer",
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}}],
        "volume_mounts": [{"name": "data", "mount_path": "/data", "read_only": True}],
    },
}


def test_pods_run_as_the_spec_account_which_tfcluster_never_creates_or_deletes(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    with pytest.raises(LaunchError, match="^kubernetes.service_account: no ServiceAccount 'trainer' in namespace 'default'"):
        backend.submit(dry_run_for(OWN_ACCOUNT))
    assert not fake.objects, "nothing is created for a run whose pods the API server would refuse"
    trainer = {"metadata": {"name": "trainer", "annotations": {"iam.gke.io/gcp-service-account": "t@p.iam"}}}
    fake.create("serviceaccounts", "default", trainer)
    backend.submit(dry_run_for(OWN_ACCOUNT))
    accounts = [key[2] for key in fake.objects if key[0] == "serviceaccounts"]
    assert accounts == ["trainer", "own-supervisor"]  # no own-runner; the supervisor's is tfcluster's own
    fake.patch("jobs", "default", "own-worker-0", {"spec": {"suspend": False}})
    [first] = fake.start_pods("own-worker-0")  # admitted: the account exists
    pod = fake.get("pods", first)["spec"]
    assert pod["serviceAccountName"] == "trainer"
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}} in pod["volumes"]
    assert TOKEN_PATH in mounts  # the account's own token setting applies (it does not opt out)
    backend.cancel("own", volumes=True)
    assert fake.get("serviceaccounts", "trainer")["metadata"]["annotations"] == trainer["metadata"]["annotations"]


def test_a_priority_class_that_does_not_exist_refuses_the_launch_in_one_line_and_nothing_stays(
        fake: FakeKubernetes) -> None:
    """The API server's Priority admission refuses every pod naming a PriorityClass it has not: ``up`` asks it first
    (a dry run of a task's pod, as the launcher's Role allows) and says so in one line, leaving nothing."""
    fake.allowed = rbac_allowed()
    backend = backend_for(fake)
    spec = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"priority_class": "team-high"}}
    with pytest.raises(LaunchError) as refused:
        backend.submit(dry_run_for(spec))
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        "the API server refuses the run's pods (a dry run of demo-chief-0's): 403 Forbidden: pods \"demo-chief-0\" is "
        "forbidden: no PriorityClass with name team-high was found; removed the"), message
    fake.now += 5  # the garbage collector ends what was deleted in the foreground
    assert not [key for key in fake.objects if key[0] != "namespaces"], fake.objects
    fake.priority_classes.add("team-high")
    fake.job_controller = True
    backend.submit(dry_run_for(spec))  # it exists: the run starts, its pods and its supervisor's of that class
    [pod] = [p for p in fake.list("pods") if p["metadata"]["name"].startswith("demo-supervisor")]
    assert pod["spec"]["priorityClassName"] == "team-high"


def test_a_launcher_whose_role_cannot_ask_launches_as_before(fake: FakeKubernetes) -> None:
    """An older k8s/rbac-launcher.yaml, without ``create`` on pods: the dry run is refused by RBAC, not by admission,
    so ``up`` cannot ask and goes on (``status`` then cannot say why either)."""
    fake.allowed = rbac_allowed() - {("", "pods", "create")}
    spec = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"priority_class": "team-high"}}
    backend_for(fake).submit(dry_run_for(spec))
    assert fake.get("jobs", "demo-chief-0") is not None


def test_status_of_a_run_whose_pods_cannot_be_created_is_pending_saying_why(fake: FakeKubernetes) -> None:
    """Its PriorityClass deleted after ``up``: the Job controller can make no pod; ``status`` says why, from the
    API server's own answer (a dry run of the pod), in one line, never a silent running run."""
    fake.priority_classes.add("team-high")
    backend = backend_for(fake)
    spec = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"priority_class": "team-high"}}
    backend.submit(dry_run_for(spec))
    ConfigMapStore(backend.api, "demo", "default", in_pod=True).write_status(JobStatus(
        "demo", BackendKind.K8S, State.RUNNING, tasks=[TaskStatus(t, State.RUNNING) for t in
                                                        ("demo-chief-0", "demo-worker-0", "demo-worker-1")]))
    fake.priority_classes.discard("team-high")
    start_all(fake, "demo-chief-0", "demo-worker-0", "demo-worker-1")
    assert pods(fake, "demo-chief-0") == []  # refused: no pod
    shown = backend.describe("demo")
    refused = 'its pod cannot be created: 403 Forbidden: pods "demo-chief-0" is forbidden: no PriorityClass with name ' \
              "team-high was found"
    assert (shown.state, shown.message) == (State.PENDING, f"pending: demo-chief-0 {refused}"), shown
    assert {t.name: (t.state, t.message) for t in shown.tasks}["demo-chief-0"] == (State.PENDING, f"pending: {refused}")


def test_tfcluster_own_account_mounts_no_api_token(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-worker-0")
    pod = fake.get("pods", running(fake, "demo-worker-0"))["spec"]
    assert pod["serviceAccountName"] == "demo-runner"
    assert TOKEN_PATH not in {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}


def test_an_object_of_the_same_name_that_is_not_ours_is_never_replaced_or_deleted(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    theirs = {"metadata": {"name": "demo", "labels": {"app": "shop-frontend"}},
              "spec": {"selector": {"app": "shop"}, "ports": [{"port": 80}]}}
    fake.create("services", "default", theirs)
    with pytest.raises(LaunchError, match="Service demo already exists in namespace default and was not made by tfcluster"):
        backend.submit(dry_run_for(DEMO))
    service = fake.get("services", "demo")
    assert service["metadata"]["labels"] == {"app": "shop-frontend"} and service["spec"]["selector"] == {"app": "shop"}
    assert sorted(key[0] for key in fake.objects) == ["services"], "the failed launch removed what it created"


def test_second_launch_of_a_running_cluster_is_refused(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    before = dict(fake.objects)
    with pytest.raises(LaunchError, match="already exists in namespace 'default'.*tfcluster down demo"):
        backend.submit(dry_run_for(DEMO))
    assert fake.objects.keys() == before.keys()


def test_logs_of_a_task_all_tasks_and_follow(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief-0", "demo-worker-0", "demo-worker-1")
    for task in ("demo-chief-0", "demo-worker-0", "demo-worker-1"):
        fake.pod_logs["default", running(fake, task)] = f"hello from {task}\n"
    assert list(backend.logs("demo", "demo-worker-1")) == ["hello from demo-worker-1"]
    assert list(backend.logs("demo"))[0] == "demo-chief-0 | hello from demo-chief-0"
    with pytest.raises(LaunchError, match="no pod for task 'demo-worker-7'"):
        list(backend.logs("demo", "demo-worker-7"))
    with pytest.raises(LaunchError, match="no task 'demo-worker-7' in cluster 'demo'"):
        list(backend.logs("demo", "demo-worker-7", follow=True))

    fake.start_pods(naming.supervisor_name("demo"))  # it supervises the run: the stream waits for the run's end
    assert backend.describe("demo").supervisor is SupervisorState.ALIVE
    pod = running(fake, "demo-chief-0")
    stream = backend.logs("demo", "demo-chief-0", follow=True)
    assert next(stream) == "hello from demo-chief-0"

    fake.pod_logs["default", pod] += "epoch 1\nbye\n"
    fake.finish_pod(pod, 0)  # while the stream follows: it was shown the first line
    for task in ("demo-worker-0", "demo-worker-1"):
        fake.finish_pod(running(fake, task), 0)
    publish_ended(backend, "demo")
    assert list(stream) == ["epoch 1", "bye"]  # ends once the pod ended and the run is over

    everyone = backend.logs("demo", follow=True)
    assert sorted(everyone) == [
        "demo-chief-0 | bye", "demo-chief-0 | epoch 1", "demo-chief-0 | hello from demo-chief-0",
        "demo-worker-0 | hello from demo-worker-0", "demo-worker-1 | hello from demo-worker-1",
    ]


def test_logs_follow_ends_after_the_running_pod_once_the_run_has_lost_its_supervisor(fake: FakeKubernetes) -> None:
    """No supervisor runs the run any more (its Job gave up): no task runs anew, so ``logs -f`` shows what the
    running pod writes until it ends, then ends too, as the local backend's stops with its supervisor, instead of
    waiting for a run that never comes."""
    fake.job_controller = True  # it runs the supervisor's pods, and replaces each that fails
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief-0")
    pod = running(fake, "demo-chief-0")
    fake.pod_logs["default", pod] = "step 1\n"
    stream = backend.logs("demo", "demo-chief-0", follow=True)
    assert next(stream) == "step 1"
    fail_running_pods(fake, naming.supervisor_name("demo"), BACKOFF_LIMIT + 1)  # until its Job gives up
    shown = backend.describe("demo")
    assert shown.supervisor is SupervisorState.LOST and not shown.state.terminal, shown  # the tasks go on
    fake.pod_logs["default", pod] += "step 2\n"
    fake.finish_pod(pod, 0)
    assert list(stream) == ["step 2"]


def publish_ended(backend: KubernetesBackend, name: str) -> None:
    """The run's status says it ended, as its supervisor publishes it."""
    ConfigMapStore(backend.api, name, "default", in_pod=False).write_status(
        JobStatus(name, BackendKind.K8S, State.SUCCEEDED))


def test_logs_follow_waits_for_a_starting_pod_then_follows_each_newer_run_of_the_task(fake: FakeKubernetes) -> None:
    """``logs -f`` follows a task as its supervisor runs it: a pod still starting shows its lines once it runs, and
    a restart's new pod follows the old one's; the stream ends once the run is over."""
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief-0")
    first = running(fake, "demo-chief-0")
    fake.update("pods", "default", first, lambda p: p["status"].update(
        phase="Pending", containerStatuses=[{"name": CONTAINER, "state": {"waiting": {"reason": "ContainerCreating"}}}]))
    fake.pod_logs["default", first] = "run 1\n"
    over = False

    def pause(seconds: float) -> None:  # the kubelet starts the container while the stream waits
        fake.update("pods", "default", first, lambda p: p["status"].update(
            phase="Running", containerStatuses=[{"name": CONTAINER, "state": {"running": {}}}]))

    stream = follow_task(backend.api, "demo", "demo-chief-0", "default", lambda: over, pause)
    assert next(stream) == "run 1"
    fake.pod_logs["default", first] += "lost\n"
    fake.patch("jobs", "default", "demo-chief-0", {"spec": {"backoffLimit": 1}})  # a new pod for the task
    fake.finish_pod(first, 137)
    [second] = fake.start_pods("demo-chief-0")
    fake.pod_logs["default", second] = "run 2\n"
    fake.finish_pod(second, 0)
    over = True
    assert list(stream) == ["lost", "run 2"]


def test_unknown_cluster(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    assert backend.describe("nope") is None
    backend.cancel("nope")


def test_unreachable_api_server_is_a_launch_error() -> None:
    api_client = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    api_client.configuration.retries = 0
    with pytest.raises(LaunchError, match="unreachable"):
        KubernetesBackend(api_client).describe("demo")


def test_launcher_rbac_role_allows_every_request_the_backend_makes(fake: FakeKubernetes) -> None:
    """What the launcher does, and the supervisor it runs on this machine (``kubernetes.supervisor: false``) with
    the launcher's kubeconfig: start, restart (a fresh copy), poll, follow, stop, stacks; as the Role allows."""
    fake.allowed = rbac_allowed()
    backend = backend_for(fake)
    fake.create("configmaps", "default", OUR_CONFIG_MAP)  # exercises replace
    dry_run = dry_run_for({**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": False}})
    apply.submit(backend.api, dry_run, "default")  # as ``submit``, without starting the supervisor process here
    fake.job_controller = True
    runtime = KubernetesRuntime(backend.api, dry_run.plan, "default", clock=lambda: fake.now, objects=settled(fake))
    tasks = dry_run.plan.tasks
    for task in tasks:
        runtime.start(task)
        assert runtime.poll(task) is None and runtime.output(task) == []
    server = serve_stacks(dry_run.plan.event_token, 0, dump=lambda: "Thread 1\n", host="127.0.0.1")
    assert server is not None
    runtime.stacks_port = port = server.server_address[1]
    fake.pod_ports["default", pod_of(fake, "demo-chief-0"), port] = ("127.0.0.1", port)
    try:
        assert runtime.read_stacks(tasks[0])  # through a port-forward: this supervisor is not in the cluster
    finally:
        server.shutdown()
        server.server_close()
    runtime.stop(tasks, 1)
    assert runtime.poll(tasks[0]) is not None  # none runs: the PodGroup's minCount follows (patch)
    runtime.start(tasks[0])  # a restart: the Job deleted, a fresh copy created
    assert runtime.adopt(tasks[0])
    runtime.close()
    backend.describe("demo")
    list(backend.logs("demo"))
    _open_board(fake, backend)
    backend.cancel("demo", volumes=True)
    allowed, used = rbac_allowed(), rbac_used(fake)
    assert used <= allowed, used - allowed
    assert {("", "pods", "delete"), ("batch", "jobs", "delete"), ("batch", "jobs", "patch"), ("batch", "jobs", "get"),
            ("", "pods", "watch"), ("batch", "jobs", "watch"),  # the supervisor's cache (``watched``)
            ("", "pods/log", "get"), ("", "configmaps", "update"), ("", "pods/portforward", "get")} <= used
    unused = {(g, r, v) for g, r, v in allowed} - used
    assert unused <= {("", "serviceaccounts", "update"), ("", "services", "update"), ("networking.k8s.io", "networkpolicies", "update"),
                      ("", "serviceaccounts", "get"), ("", "services", "get"), ("networking.k8s.io", "networkpolicies", "get"),
                      ("", "persistentvolumeclaims", "get"), ("", "persistentvolumeclaims", "update"),
                      ("scheduling.k8s.io", "podgroups", "get"), ("scheduling.k8s.io", "podgroups", "update"),
                      ("apps", "deployments", "update"), ("", "pods/portforward", "create"), ("", "pods/exec", "create"),
                      ("", "pods/exec", "get"),  # debug's py-spy (the next test)
                      ("", "pods", "get"),  # logs -f (``follow``); the supervisor reads its pods from its watch
                      *RBAC_OBJECTS}, unused  # RBAC: the next test


#: The launcher's rights on the in-cluster supervisor's Role and RoleBinding.
RBAC_OBJECTS = {("rbac.authorization.k8s.io", resource, verb) for resource in ("roles", "rolebindings")
                for verb in ("get", "list", "create", "update", "delete")}


def test_launcher_rbac_role_allows_creating_and_removing_the_in_cluster_supervisor(fake: FakeKubernetes) -> None:
    """Up creates its ServiceAccount, Role, RoleBinding and Job (a Role left by an earlier run of the cluster is
    replaced), down removes them, the supervisor's Job first; as the launcher's Role allows, every right used."""
    backend = backend_for(fake)
    spec = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": True}}
    left = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "demo-supervisor", "labels": naming.labels("demo", "old")}, "rules": []}
    fake.create("roles", "default", left)
    backend.submit(dry_run_for(spec))
    made = {(kind, name) for (kind, _, name) in fake.objects if name.startswith("demo-supervisor")}
    assert made == {("serviceaccounts", "demo-supervisor"), ("roles", "demo-supervisor"),
                    ("rolebindings", "demo-supervisor"), ("jobs", "demo-supervisor")}
    assert fake.objects["roles", "default", "demo-supervisor"]["rules"]  # replaced by the run's own
    backend.cancel("demo")
    fake.now += 5  # the garbage collector ends the Jobs deleted in the foreground
    assert not [key for key in fake.objects if key[2].startswith("demo-supervisor")]
    deleted_jobs = [name for kind, name, _ in fake.deletions if kind == "jobs"]
    assert deleted_jobs[0] == "demo-supervisor", deleted_jobs
    allowed, used = rbac_allowed(), rbac_used(fake)
    assert used <= allowed, used - allowed
    # the fake's garbage collector removes the supervisor's Role and RoleBinding with the ConfigMap at once (they
    # are its own); a real one is asynchronous, and a run from before owned none: down deletes them itself
    unused = {("rbac.authorization.k8s.io", "rolebindings", verb) for verb in ("get", "update")}
    assert RBAC_OBJECTS - used <= unused | {("rbac.authorization.k8s.io", kind, "delete") for kind in ("roles", "rolebindings")}


def test_no_kubeconfig_is_backend_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(BackendUnavailable, match="KUBECONFIG"):
        KubernetesBackend.create(KubernetesOptions())


STATUS_WITHOUT_GENERATED_REQUESTS = """\
import sys
from launcher.cli.commands import main
try:
    main(["status", "cli", "-o", "json"])
except SystemExit as end:
    assert not end.code, end.code
generated = sorted(m for m in sys.modules if m.startswith("kubernetes.client.api."))
assert not generated, generated
"""


def test_cli_up_detached_status_logs_down_via_kubeconfig(
    fake: FakeKubernetes, cli, write_spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(fake, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec = write_spec({"name": "cli", "roles": {"chief": {}, "worker": {"replicas": 1}}, "kubernetes": {"namespace": "ml"}})
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 0, result.output
    assert "warning: nothing supervises" not in result.output  # its supervisor runs in the cluster
    assert fake.get("jobs", "cli-supervisor", "ml") is not None
    assert registry.lookup("cli")[1] == {"namespace": "ml"}
    start_all(fake, "cli-chief-0", namespace="ml")
    result = cli.invoke(main, ["status", "cli", "-o", "json"])
    assert result.exit_code == 0 and '"state": "pending"' in result.output  # worker not started yet
    # a status in a process of its own: no generated request class of the client imported (seconds of import)
    status = subprocess.run([sys.executable, "-c", STATUS_WITHOUT_GENERATED_REQUESTS], capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 0 and '"state": "pending"' in status.stdout, status.stdout + status.stderr
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 1 and "already exists in namespace 'ml'" in result.output
    fake.on_sigterm["cli-chief-0"] = OnSigterm(seconds=5)  # saves a checkpoint when stopped
    result = cli.invoke(main, ["down", "cli", "--volumes"])
    assert result.exit_code == 0
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 1 and "still shutting down" in result.output
    fake.now += 5
    assert not fake.objects
    result = cli.invoke(main, ["watch", "cli", "-b", "k8s"])
    assert result.exit_code == 1 and "no cluster named 'cli'" in result.output


def test_cli_up_detached_warns_when_its_dry_run_says_only_a_watch_supervises_it(
    fake: FakeKubernetes, cli, write_spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(fake, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec = write_spec({"name": "cli", "roles": {"chief": {}, "worker": {"replicas": 1}},
                       "kubernetes": {"namespace": "ml", "supervisor": False}})
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 0, result.output
    assert "while this machine is off, nothing supervises it; `tfcluster watch cli` starts a new one" in result.output
    assert fake.get("jobs", "cli-supervisor", "ml") is None
    # its supervisor is a process on this machine: taken down with the run (left, it would retry against the
    # stopped fake for the rest of the session, a core's fifth)
    result = cli.invoke(main, ["down", "cli"])
    assert result.exit_code == 0, result.output


def _open_board(fake: FakeKubernetes, backend: KubernetesBackend, names: tuple[str, ...] = ("demo",),
                board_name: str = "demo-tensorboard") -> tuple[str, dict[str, object]]:
    """``backend.tensorboard(names)`` with the test as Deployment controller of ``board_name``; returns the pod,
    what the board answered on the data API (through the forward), its objects while it ran, and
    whether the port still answered right after leaving the board."""
    pod_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PodTensorBoard)
    threading.Thread(target=pod_server.serve_forever, daemon=True).start()
    rolled: list[str] = []

    def deployment_controller() -> None:  # the Deployment controller and kubelet, once the command applied it
        # not ready at first: ready only once the command has read the Deployment and found it not ready
        while not any(method == "GET" and f"/deployments/{board_name}" in path for method, path in fake.requests):
            time.sleep(0.05)
        pod = fake.roll_out(board_name)
        fake.pod_ports["default", pod, 6006] = pod_server.server_address[:2]
        rolled.append(pod)

    threading.Thread(target=deployment_controller, daemon=True).start()
    port = free_port()
    seen: dict[str, object] = {}
    try:
        with backend.tensorboard(list(names), "127.0.0.1", port) as board:
            assert board.url == f"http://127.0.0.1:{port}/" and board.running()
            with urllib.request.urlopen(board.url + "data/plugin/scalars/tags", timeout=10) as response:
                seen["answer"] = json.loads(response.read())
            seen["objects"] = {p: fake.get(p, board_name) for p in ("deployments", "services", "networkpolicies")}
            seen["tasks"] = backend.describe("demo").tasks
        with socket.socket() as sock:  # at once, before the pod's server shuts down (a 0.5 s poll)
            seen["port open after leaving"] = sock.connect_ex(("127.0.0.1", port)) == 0
    finally:
        pod_server.shutdown()
    return rolled[0], seen


class _PodTensorBoard(http.server.BaseHTTPRequestHandler):
    """Stands for TensorBoard in the board's pod: answers its data API with a fixed document."""

    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "served-by": "the pod"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_tensorboard_deployment_is_owned_by_the_run_and_reached_through_a_port_forward(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    publish(fake, "demo")
    pod, seen = _open_board(fake, backend)
    assert seen["answer"] == {"path": "/data/plugin/scalars/tags", "served-by": "the pod"}
    config_map = fake.get("configmaps", "demo-tfconfig")
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "demo-tfconfig", "uid": config_map["metadata"]["uid"]}
    for plural, obj in seen["objects"].items():
        assert obj["metadata"]["ownerReferences"] == [owner], plural
    assert seen["tasks"] == describe_without_board(fake)  # the board's pod is no task of the run
    forwards = [path for method, path in fake.requests if "/portforward" in path]
    assert forwards and all(path == f"/api/v1/namespaces/default/pods/{pod}/portforward?ports=6006" for path in forwards)
    for plural in ("deployments", "services", "networkpolicies"):  # leaving the board leaves nothing of it
        assert fake.get(plural, "demo-tensorboard") is None, plural
    assert fake.get("pods", pod) is None
    assert not seen["port open after leaving"], "the forwarded port is still open"


OTHER = {"name": "other", "roles": {"chief": {}, "worker": {"replicas": 1}}}


def _owner(fake: FakeKubernetes, run: str) -> dict[str, str]:
    uid = fake.get("configmaps", f"{run}-tfconfig")["metadata"]["uid"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": f"{run}-tfconfig", "uid": uid}


def test_a_board_of_two_runs_reads_both_claims_is_owned_by_both_and_leaves_nothing(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    backend.submit(dry_run_for(OTHER, "run-2"))
    publish(fake, "demo")
    board_name = naming.shared_tensorboard_name(["demo", "other"])
    # Any order, a name twice: the same board of the two runs.
    pod, seen = _open_board(fake, backend, ("other", "demo", "other"), board_name)
    assert seen["answer"] == {"path": "/data/plugin/scalars/tags", "served-by": "the pod"}
    owners = [_owner(fake, "demo"), _owner(fake, "other")]
    for plural, obj in seen["objects"].items():
        assert obj is not None and obj["metadata"]["ownerReferences"] == owners, plural
    spec = seen["objects"]["deployments"]["spec"]["template"]["spec"]
    claims = {v["persistentVolumeClaim"]["claimName"]: v["name"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"demo-checkpoints": "demo-checkpoints", "other-checkpoints": "other-checkpoints"}
    [container] = spec["containers"]
    assert container["args"][3:5] == ["--logdir_spec", "demo:/runs/demo/tensorboard,other:/runs/other/tensorboard"]
    assert seen["tasks"] == describe_without_board(fake)  # the board's pod is no task of either run
    forwards = [path for method, path in fake.requests if "/portforward" in path]
    assert forwards and all(path == f"/api/v1/namespaces/default/pods/{pod}/portforward?ports=6006" for path in forwards)
    for plural in ("deployments", "services", "networkpolicies"):  # leaving the board leaves nothing of it
        assert fake.get(plural, board_name) is None, plural
    assert fake.get("pods", pod) is None
    assert not [key for key in fake.objects if key[0] in ("deployments", "services", "networkpolicies") and
                key[2].startswith("tfcluster-tensorboard")]
    assert not seen["port open after leaving"], "the forwarded port is still open"


def _leave_shared_board(fake: FakeKubernetes, runs: list[str]) -> str:
    """What a killed ``tfcluster tensorboard RUNS`` leaves: the shared board, owned by every run, with a ready pod."""
    configs = {run: fake.get("configmaps", f"{run}-tfconfig") for run in runs}
    plans = {run: planned_again(run, configs[run]) for run in runs}
    board = shared_board([BoardRun.of(plans[run]) for run in runs], checked_board(plans[runs[0]], configs[runs[0]]["data"]))
    owners = [_owner(fake, run) for run in runs]
    for obj in board:
        plural = {"Deployment": "deployments", "Service": "services", "NetworkPolicy": "networkpolicies"}[obj["kind"]]
        fake.create(plural, "default", {**obj, "metadata": {**obj["metadata"], "ownerReferences": owners}})
    name = board[0]["metadata"]["name"]
    fake.roll_out(name)
    return name


def test_down_of_any_shown_run_removes_a_shared_board_a_killed_command_left(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    backend.submit(dry_run_for(OTHER, "run-2"))
    board = _leave_shared_board(fake, ["demo", "other"])
    backend.cancel("other")  # not the run whose labels the board carries
    fake.now += 1
    left = [key for key in fake.objects if key[2].startswith((board, "other"))]
    assert left == [("persistentvolumeclaims", "default", "other-checkpoints")], left  # kept: its checkpoints
    assert fake.get("jobs", "demo-chief-0") is not None and fake.get("configmaps", "demo-tfconfig") is not None


def test_the_garbage_collector_removes_a_shared_board_with_the_last_of_its_runs(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    backend.submit(dry_run_for(OTHER, "run-2"))
    board = _leave_shared_board(fake, ["demo", "other"])
    other = _owner(fake, "other")
    fake.delete("configmaps", "default", "demo-tfconfig", "Background")
    for plural in ("deployments", "services", "networkpolicies"):  # still shows the other run
        assert fake.get(plural, board)["metadata"]["ownerReferences"] == [other], plural
    fake.delete("configmaps", "default", "other-tfconfig", "Background")
    assert not [key for key in fake.objects if key[2].startswith(board)], list(fake.objects)  # its pod too


def test_a_board_of_several_runs_names_the_run_it_cannot_show(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    with pytest.raises(LaunchError, match="no cluster named 'nope' in namespace 'default'"):
        backend.tensorboard(["demo", "nope"], "127.0.0.1", free_port())
    backend.submit(dry_run_for({**PSS, "tensorboard": {"enabled": False}}, "run-2"))
    with pytest.raises(LaunchError, match="run 'pss' writes no TensorBoard summaries"):
        backend.tensorboard(["demo", "pss"], "127.0.0.1", free_port())
    assert not [key for key in fake.objects if key[0] == "deployments"]


def publish(fake: FakeKubernetes, run: str) -> None:
    """A status of every task of ``run`` running, published as its supervisor publishes it."""
    store = ConfigMapStore(backend_for(fake).api, run, "default", in_pod=False)
    tasks = [TaskStatus(t.name, State.RUNNING) for t in store.read_plan().tasks]
    store.write_status(JobStatus(run, BackendKind.K8S, State.RUNNING, tasks=tasks))


def describe_without_board(fake: FakeKubernetes) -> list[object]:
    """The run's task statuses as ``describe`` gives them once the board is gone."""
    return backend_for(fake).describe("demo").tasks


def test_down_removes_a_board_a_killed_command_left(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    config_map = fake.get("configmaps", "demo-tfconfig")
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "demo-tfconfig", "uid": config_map["metadata"]["uid"]}
    for obj in json.loads(config_map["data"]["tensorboard.json"]):
        plural = {"Deployment": "deployments", "Service": "services", "NetworkPolicy": "networkpolicies"}[obj["kind"]]
        fake.create(plural, "default", {**obj, "metadata": {**obj["metadata"], "ownerReferences": [owner]}})
    fake.roll_out("demo-tensorboard")
    backend.cancel("demo")
    fake.now += 1
    assert not [key for key in fake.objects if key[0] != "persistentvolumeclaims"], list(fake.objects)


def _with_role_binding(board: list[dict]) -> list[dict]:
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "demo-tensorboard", "labels": board[0]["metadata"]["labels"]},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "demo-supervisor", "namespace": "default"}]}
    return [binding, *board]


def _with_extra_deployment(board: list[dict]) -> list[dict]:
    return [*board, {**board[0], "metadata": {**board[0]["metadata"], "name": "demo-miner"}}]


def _pod(board: list[dict]) -> dict:
    return board[0]["spec"]["template"]["spec"]


def _with_image(board: list[dict]) -> list[dict]:
    _pod(board)["containers"][0]["image"] = "evil.example.com/miner:1"
    return board


def _with_host_path(board: list[dict]) -> list[dict]:
    _pod(board)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    _pod(board)["containers"][0]["volumeMounts"].append({"name": "host", "mountPath": "/host"})
    return board


def _with_service_account(board: list[dict]) -> list[dict]:
    _pod(board)["serviceAccountName"] = "demo-supervisor"
    _pod(board)["automountServiceAccountToken"] = True
    return board


@pytest.mark.parametrize("tamper", [_with_role_binding, _with_extra_deployment, _with_image, _with_host_path,
                                    _with_service_account, lambda board: "not a board"])
def test_tensorboard_refuses_a_board_its_config_map_was_edited_to_hold_and_creates_nothing(
        fake: FakeKubernetes, tamper) -> None:
    """Whoever may write the run's ConfigMap (namespace editors, the supervisor's account) cannot make the user's
    ``tfcluster tensorboard`` create what they put there: only the board the run's plan makes is applied."""
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    stored = fake.get("configmaps", "demo-tfconfig")["data"]["tensorboard.json"]
    fake.patch("configmaps", "default", "demo-tfconfig",
               {"data": {"tensorboard.json": json.dumps(tamper(json.loads(stored)))}})
    before = set(fake.objects)
    with pytest.raises(LaunchError) as refused:
        backend.tensorboard(["demo"], "127.0.0.1", free_port())
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("ConfigMap demo-tfconfig holds TensorBoard objects that are not the board of "
                                         "run 'demo'"), refused.value
    assert set(fake.objects) == before  # nothing created


def test_tensorboard_refuses_a_config_map_holding_another_runs_spec(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
    spec = json.loads(fake.get("configmaps", "demo-tfconfig")["data"]["spec.json"])
    fake.patch("configmaps", "default", "demo-tfconfig", {"data": {"spec.json": json.dumps({**spec, "name": "victim"})}})
    before = set(fake.objects)
    with pytest.raises(LaunchError, match="holds the spec of 'victim', not of 'demo': refusing it"):
        backend.tensorboard(["demo"], "127.0.0.1", free_port())
    assert set(fake.objects) == before


def test_tensorboard_of_an_unknown_or_summary_less_run_is_a_one_line_error(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    with pytest.raises(LaunchError, match="no cluster named 'nope'"):
        backend.tensorboard(["nope"], "127.0.0.1", free_port())
    backend.submit(dry_run_for({**PSS, "tensorboard": {"enabled": False}}, "run-1"))
    with pytest.raises(LaunchError, match="tensorboard.enabled: false"):
        backend.tensorboard(["pss"], "127.0.0.1", free_port())


def test_a_launcher_refused_the_supervisors_rights_is_told_in_one_line_and_nothing_stays(fake: FakeKubernetes) -> None:
    fake.allowed = rbac_allowed() - {("rbac.authorization.k8s.io", "roles", "create")}
    backend = backend_for(fake)
    with pytest.raises(LaunchError) as refused:
        backend.submit(dry_run_for(DEMO))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("cannot create Role demo-supervisor: 403 Forbidden")
    assert "kubernetes.supervisor: false" in message and "removed the" in message
    fake.allowed = None
    fake.now += 5  # the garbage collector ends the Jobs deleted in the foreground
    assert not [key for key in fake.objects if key[0] in ("configmaps", "serviceaccounts", "jobs")]
    assert backend.describe("demo") is None


def test_only_an_object_labelled_the_supervisors_gets_the_supervisor_hint(fake: FakeKubernetes) -> None:
    """By its label, not its name: someone's own ``build-supervisor`` account refused is a plain refusal."""
    fake.allowed = rbac_allowed() - {("", "serviceaccounts", "create")}
    backend = backend_for(fake)
    labels = naming.labels("demo", "manual")
    for name, extra, hinted in [("build-supervisor", {}, False), ("audit", {naming.LABEL_SUPERVISOR: "demo"}, True)]:
        account = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": name, "namespace": "default", "labels": {**labels, **extra}}}
        with pytest.raises(LaunchError) as refused:
            apply.apply(backend.api, account, "default")
        assert ("kubernetes.supervisor: false" in str(refused.value)) is hinted, refused.value


def test_debug_reads_the_stacks_of_every_running_pod_and_says_why_not_in_one_line(
        fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief-0", "demo-worker-0", "demo-worker-1")
    fake.finish_pod(running(fake, "demo-worker-1"), 0)  # ended: nothing to read
    fake.pod_exec["demo-chief-0"] = lambda command: (0, "1\n" if "ls" in command else 'Thread 1 (idle): "MainThread"\n', "")
    fake.pod_exec["demo-worker-0"] = lambda command: (127, "", "timeout: failed to run command 'py-spy': No such file\n") \
        if "py-spy" in command else (0, "1\n", "")
    dumps = backend.stacks("demo")
    assert dumps == {"demo-chief-0": 'Thread 1 (idle): "MainThread"', "demo-worker-0": None}
    assert "no stacks of demo-worker-0: py-spy is not in the task's image" in caplog.text  # the CLI shows it on stderr
    # an exec's output is read up to the cap, no further: the rest is not read, and it says so
    fake.pod_exec["demo-chief-0"] = lambda command: (0, "1\n" if "ls" in command else "x" * (2 * MAX_STACK_BYTES), "")
    assert backend.stacks("demo")["demo-chief-0"] is None
    assert f"its output passed {MAX_STACK_BYTES} bytes; left unread" in caplog.text
