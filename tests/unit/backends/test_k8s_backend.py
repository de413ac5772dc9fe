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
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from fakes.kubernetes_api import IGNORES_SIGTERM, TOKEN_PATH, FakeKubernetes, OnSigterm
from helpers.boards import free_port
from helpers.k8s_fake import backend_for, rbac_allowed, rbac_used
from helpers.k8s_specs import DEMO, dry_run_for, manifests, plan_for
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.backends.kubernetes.tensorboard import BoardRun, shared_board, stored_board
from launcher.cli import registry
from launcher.cli.commands import main
from launcher.cli.watch import watch
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan import naming
from launcher.protocol.events import MANUAL_TOKEN
from launcher.supervision.status import State

PSS = {"name": "pss", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}}}
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp")

#: A ConfigMap a previous run of cluster demo left (our labels): replaced, not refused.
OUR_CONFIG_MAP = {"metadata": {"name": "demo-tfconfig", "labels": naming.labels("demo", "old")}, "data": {}}


def pods(fake: FakeKubernetes, prefix: str) -> list[str]:
    return sorted(name for (plural, _, name) in fake.objects if plural == "pods" and name.startswith(prefix))


def running(fake: FakeKubernetes, task: str) -> str:
    """The current pod of ``task`` (e.g. demo-worker-1)."""
    return max(pods(fake, task + "-"), key=lambda p: (failure_count(fake, p), p))  # names count up


def failure_count(fake: FakeKubernetes, pod: str) -> int:
    return int(fake.get("pods", pod)["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"])


def start_all(fake: FakeKubernetes, *jobs: str) -> None:
    for job in jobs:
        fake.start_pods(job)


def test_submit_applies_exactly_the_planned_manifests(fake: FakeKubernetes) -> None:
    plan = plan_for(DEMO, "run-1")
    backend = backend_for(fake, namespace="team-a")
    backend.submit(KubernetesBackend.dry_run(plan))
    assert backend.describe("demo").state is State.PENDING
    expected = manifests(plan)
    assert len(fake.objects) == len(expected)
    plurals = {"ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps", "Service": "services",
               "NetworkPolicy": "networkpolicies", "PersistentVolumeClaim": "persistentvolumeclaims", "Job": "jobs",
               "Role": "roles", "RoleBinding": "rolebindings"}
    for obj in expected:
        stored = fake.get(plurals[obj["kind"]], obj["metadata"]["name"], "team-a")
        assert stored is not None, obj["kind"]
        for key in SERVER_FIELDS:
            del stored["metadata"][key]
        stored.pop("status", None)
        moved = {**obj, "metadata": {**obj["metadata"], "namespace": "team-a"}}
        if obj["kind"] == "RoleBinding":  # the supervisor's account is where the run went, not the spec's namespace
            moved["subjects"] = [{**subject, "namespace": "team-a"} for subject in obj["subjects"]]
        assert stored == moved


def test_a_backend_without_namespace_follows_the_spec_namespace(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "ns", "roles": {"worker": {"replicas": 1}}, "kubernetes": {"namespace": "ml"}}))
    assert fake.get("jobs", "ns-worker", "ml") is not None
    assert backend.describe("ns").state is State.PENDING


def test_mwms_lifecycle_fail_restart_succeed_down(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    assert backend.describe("demo").state is State.PENDING
    start_all(fake, "demo-chief", "demo-worker")
    status = backend.describe("demo")
    assert status.state is State.RUNNING and [t.name for t in status.tasks] == ["demo-chief-0", "demo-worker-0", "demo-worker-1"]

    fake.now += 10
    fake.finish_pod(running(fake, "demo-worker-1"), 137, "OOMKilled")
    status = backend.describe("demo")
    assert status.state is State.RESTARTING
    assert (status.tasks[2].exit_code, status.tasks[2].message) == (137, "OOMKilled")
    # the survivors lose their collective and exit "peer unavailable" (175); the Job controller replaces all three
    fake.finish_pod(running(fake, "demo-chief-0"), 175)
    fake.finish_pod(running(fake, "demo-worker-0"), 175)
    fake.now += 10
    for job in ("demo-chief", "demo-worker"):
        fake.reconcile(job)
    status = backend.describe("demo")
    assert status.state is State.RUNNING and status.restarts == 1
    assert [t.restarts for t in status.tasks] == [1, 1, 1]
    assert backend.watch_round("demo") == []

    fake.pod_logs["default", running(fake, "demo-chief-0")] = (
        f'TFCLUSTER_EVENT/{MANUAL_TOKEN} {{"event":"restored","task":"demo-chief-0","time":1,"epoch":1,"step":20}}\n'
        f'TFCLUSTER_EVENT/{MANUAL_TOKEN} {{"event":"epoch","task":"demo-chief-0","time":2,"epoch":3,"step":120,"metrics":{{"loss":0.25}}}}\n'
    )
    assert backend.describe("demo").progress.loss == 0.25
    for task in ("demo-chief-0", "demo-worker-0", "demo-worker-1"):
        fake.finish_pod(running(fake, task), 0)
    for job in ("demo-chief", "demo-worker"):
        fake.reconcile(job)
    status = backend.describe("demo")
    assert status.state is State.SUCCEEDED and "demo-chief: Complete" in status.message
    assert backend.watch_round("demo") == []  # every Job finished by itself

    backend.cancel("demo")
    assert ("jobs", "demo-chief", "Foreground") in fake.deletions
    assert backend.describe("demo").message == "being deleted"  # Foreground: a Job goes after its pods
    fake.now += 1
    assert [key[0] for key in fake.objects] == ["persistentvolumeclaims"]  # checkpoints stay
    assert backend.describe("demo") is None
    backend.cancel("demo", volumes=True)
    assert not fake.objects


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


def test_exit_code_policy_fails_the_job_and_cleans_up_the_rest(fake: FakeKubernetes) -> None:
    backend = backend_for(fake, linger=30)
    backend.submit(dry_run_for({"name": "ec", "roles": {"chief": {}, "worker": {"replicas": 2}}, "restart": {"policy": "exit-code"}}))
    start_all(fake, "ec-chief", "ec-worker")
    fake.finish_pod(running(fake, "ec-worker-0"), 1)  # a bug: 1-127 fails the job
    fake.reconcile("ec-worker")
    status = backend.describe("ec")
    assert status.state is State.FAILED and "PodFailurePolicy" in status.message
    assert backend.watch_round("ec") == ["run failed: deleted Job ec-chief"]
    fake.now += 1
    assert fake.get("jobs", "ec-chief") is None and not pods(fake, "ec-chief")


def test_signal_exit_is_retried_until_the_budget_is_spent(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "bud", "roles": {"worker": {"replicas": 2}}, "restart": {"policy": "exit-code", "max_restarts": 1}}))
    fake.start_pods("bud-worker")
    fake.finish_pod(running(fake, "bud-worker-1"), 137)
    fake.reconcile("bud-worker")
    assert backend.describe("bud").state is State.RUNNING
    fake.finish_pod(running(fake, "bud-worker-1"), 139)  # SIGSEGV (143, the preempted code, would be ignored)
    fake.reconcile("bud-worker")
    status = backend.describe("bud")
    assert status.state is State.FAILED and "FailedIndexes" in status.message
    assert status.tasks[1].restarts == 1 and status.tasks[1].exit_code == 139


def test_preemption_does_not_use_the_budget(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "pre", "roles": {"worker": {"replicas": 1}}, "restart": {"max_restarts": 0}}))
    fake.start_pods("pre-worker")
    fake.finish_pod(running(fake, "pre-worker-0"), 143, "Preempted", disrupted=True)
    fake.reconcile("pre-worker")
    assert backend.describe("pre").state is State.RUNNING


@pytest.mark.parametrize(("code", "disrupted"), [(143, False), (137, True)], ids=["saved-and-exited", "evicted-then-killed"])
def test_preempted_pods_are_replaced_without_using_the_budget(fake: FakeKubernetes, code: int, disrupted: bool) -> None:
    """The Job controller's Ignore rules: the preempted exit code, or an eviction killed after its grace."""
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "pe", "roles": {"chief": {}, "worker": {"replicas": 1}}, "restart": {"max_restarts": 0}}))
    start_all(fake, "pe-chief", "pe-worker")
    for round_ in (1, 2):
        fake.finish_pod(running(fake, "pe-worker-0"), code, disrupted=disrupted)
        fake.reconcile("pe-worker")
        status = backend.describe("pe")
        assert status.state is State.RUNNING, status.message
        assert (status.restarts, status.preemptions, status.tasks[1].preemptions) == (0, round_, round_)
        assert failure_count(fake, running(fake, "pe-worker-0")) == 0
    fake.finish_pod(running(fake, "pe-worker-0"), 1)  # a failure still counts: budget 0
    fake.reconcile("pe-worker")
    assert backend.describe("pe").state is State.FAILED


def test_without_a_preemption_budget_a_preempted_pod_counts(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    spec = {"name": "pz", "roles": {"worker": {"replicas": 1}}, "restart": {"max_restarts": 0, "max_preemptions": 0}}
    backend.submit(dry_run_for(spec))
    fake.start_pods("pz-worker")
    fake.finish_pod(running(fake, "pz-worker-0"), 143)
    fake.reconcile("pz-worker")
    assert backend.describe("pz").state is State.FAILED


@pytest.mark.parametrize(("survivor", "exit_code", "restarts"), [
    (IGNORES_SIGTERM, 137, [1, 1, 1]),  # hung in its collective: killed when the grace runs out, a failure like any other
    (OnSigterm(seconds=5), 143, [0, 0, 1]),  # answers the notice and saves within the grace: a preemption
], ids=["hung-killed-after-the-grace", "saves-within-the-grace"])
def test_gang_restart_deletes_survivors_that_hang(fake: FakeKubernetes, survivor: OnSigterm, exit_code: int,
                                                  restarts: list[int]) -> None:
    backend = backend_for(fake, gang_grace=60)
    backend.submit(dry_run_for(DEMO))  # terminationGracePeriodSeconds: save_grace_seconds, 60
    start_all(fake, "demo-chief", "demo-worker")
    survivors = [running(fake, "demo-chief-0"), running(fake, "demo-worker-0")]
    fake.on_sigterm.update({"demo-chief-0": survivor, "demo-worker-0": survivor})
    fake.now += 100
    fake.finish_pod(running(fake, "demo-worker-1"), 137)
    fake.reconcile("demo-worker")  # worker-1 comes back; the two survivors hang instead of failing
    fake.now += 30
    assert backend.watch_round("demo") == []
    fake.now += 31
    actions = backend.watch_round("demo")
    assert [a.split()[3] for a in actions] == survivors
    fake.now += 4
    assert [fake.get("pods", p)["status"]["phase"] for p in survivors] == ["Running", "Running"]  # told, not yet gone
    assert backend.describe("demo").state is State.RESTARTING
    assert backend.watch_round("demo") == []  # being deleted: not deleted again
    fake.now += 60
    assert [fake.get("pods", p)["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in survivors] == \
        [exit_code] * 2
    assert backend.watch_round("demo") == []  # their own failures do not start another round
    for job in ("demo-chief", "demo-worker"):
        fake.reconcile(job)
    fake.now += 1
    assert all(fake.get("pods", p) is None for p in survivors)  # counted, so the Job controller let them go
    status = backend.describe("demo")
    assert status.state is State.RUNNING and [t.restarts for t in status.tasks] == restarts
    assert [failure_count(fake, running(fake, t)) for t in ("demo-chief-0", "demo-worker-0", "demo-worker-1")] == restarts
    fake.now += 100
    assert backend.watch_round("demo") == []


def test_the_deadline_fails_the_job_and_stops_its_pods(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "dl", "roles": {"chief": {}, "worker": {"replicas": 2}}, "deadline_seconds": 600}))
    start_all(fake, "dl-chief", "dl-worker")
    fake.now += 599
    for job in ("dl-chief", "dl-worker"):
        fake.reconcile(job)
    assert backend.describe("dl").state is State.RUNNING
    fake.now += 1
    for job in ("dl-chief", "dl-worker"):
        fake.reconcile(job)
    status = backend.describe("dl")
    assert status.state is State.FAILED and "dl-chief: Failed (DeadlineExceeded" in status.message, status.message
    assert {t.exit_code for t in status.tasks} == {143}  # stopped by the Job controller: SIGTERM, saved
    assert backend.watch_round("dl") == []  # the Job controller ended every Job


def test_down_waits_for_pods_that_are_saving_and_a_launch_meanwhile_is_refused(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief", "demo-worker")
    fake.on_sigterm["demo-chief-0"] = OnSigterm(seconds=20)  # its checkpoint takes 20 s to write
    backend.cancel("demo")
    assert backend.describe("demo").state is State.CANCELLED
    with pytest.raises(LaunchError, match="still shutting down, retry in a few seconds"):
        backend.submit(dry_run_for(DEMO))
    fake.now += 10
    assert fake.get("jobs", "demo-worker") is None and fake.get("jobs", "demo-chief")["metadata"]["deletionTimestamp"]
    fake.now += 10
    assert backend.describe("demo") is None
    backend.submit(dry_run_for(DEMO))


def test_gang_restart_spares_the_replacements_of_the_failed_round(fake: FakeKubernetes) -> None:
    backend = backend_for(fake, gang_grace=60)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief", "demo-worker")
    fake.now += 10
    fake.finish_pod(running(fake, "demo-worker-1"), 137)
    fake.reconcile("demo-worker")  # worker-1 is replaced before the survivors notice
    fake.now += 20
    fake.finish_pod(running(fake, "demo-chief-0"), 175)
    fake.finish_pod(running(fake, "demo-worker-0"), 175)
    for job in ("demo-chief", "demo-worker"):
        fake.reconcile(job)
    assert backend.describe("demo").state is State.RUNNING  # the new gang: worker-1's replacement and two fresh pods
    fake.now += 61
    assert backend.watch_round("demo") == []
    fake.now += 10
    fake.finish_pod(running(fake, "demo-worker-0"), 137)  # a member of the new gang fails: a new round
    fake.reconcile("demo-worker")
    others = [running(fake, "demo-chief-0"), running(fake, "demo-worker-1")]
    fake.now += 61
    assert [a.split()[3] for a in backend.watch_round("demo")] == others


def test_gang_restart_is_mwms_only(fake: FakeKubernetes) -> None:
    backend = backend_for(fake, gang_grace=0)
    backend.submit(dry_run_for(PSS))
    start_all(fake, "pss-chief", "pss-worker", "pss-ps", "pss-evaluator")
    fake.now += 10
    fake.finish_pod(running(fake, "pss-worker-1"), 137)  # PSS tolerates a lost worker
    fake.now += 100
    assert backend.watch_round("pss") == []


def launch_pss_until_chief_succeeds(fake: FakeKubernetes, backend: KubernetesBackend, spec: dict = PSS) -> None:
    backend.submit(dry_run_for(spec))
    start_all(fake, "pss-chief", "pss-worker", "pss-ps", "pss-evaluator")
    fake.finish_pod(running(fake, "pss-chief-0"), 0)
    fake.reconcile("pss-chief")


@pytest.mark.parametrize(("spec", "linger"), [(PSS, 30), ({**PSS, "command": ["python", "train.py"]}, 5)],
                         ids=["built-in", "user-program"])
def test_chief_success_ends_the_servers_after_the_policy_linger(fake: FakeKubernetes, spec: dict, linger: int) -> None:
    backend = backend_for(fake)
    launch_pss_until_chief_succeeds(fake, backend, spec)
    assert backend.describe("pss").state is State.SUCCEEDED
    assert backend.watch_round("pss") == []  # the others may still exit by themselves (completion marker)
    fake.finish_pod(running(fake, "pss-ps-0"), 0)
    fake.reconcile("pss-ps")
    fake.now += linger - 1
    assert backend.watch_round("pss") == []
    fake.now += 2
    deleted = backend.watch_round("pss")
    assert deleted == ["run succeeded: deleted Job pss-worker", "run succeeded: deleted Job pss-evaluator"]
    fake.now += 1
    status = backend.describe("pss")
    assert status.state is State.SUCCEEDED and [t.name for t in status.tasks] == ["pss-chief-0", "pss-ps-0"]


def test_worker_zero_decides_without_a_chief(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "wz", "roles": {"worker": {"replicas": 3}}}))
    fake.start_pods("wz-worker")
    fake.finish_pod(running(fake, "wz-worker-0"), 0)
    fake.reconcile("wz-worker")  # successPolicy succeededIndexes "0"
    assert backend.describe("wz").state is State.SUCCEEDED
    fake.now += 1
    assert pods(fake, "wz-worker") == [running(fake, "wz-worker-0")]


def test_failed_launch_removes_what_it_created_and_keeps_an_existing_claim(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    fake.create("persistentvolumeclaims", "default", {"metadata": {"name": "demo-checkpoints"}, "spec": {"accessModes": ["ReadWriteMany"]}})
    fake.create("configmaps", "default", OUR_CONFIG_MAP)
    fake.fail_next("POST", "jobs", 403)
    with pytest.raises(LaunchError, match="cannot create Job demo-chief: 403 Forbidden"):
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
    first, _ = fake.start_pods("own-worker")  # admitted: the account exists
    pod = fake.get("pods", first)["spec"]
    assert pod["serviceAccountName"] == "trainer"
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}} in pod["volumes"]
    assert TOKEN_PATH in mounts  # the account's own token setting applies (it does not opt out)
    backend.cancel("own", volumes=True)
    assert fake.get("serviceaccounts", "trainer")["metadata"]["annotations"] == trainer["metadata"]["annotations"]


def test_tfcluster_own_account_mounts_no_api_token(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    pod = fake.get("pods", fake.start_pods("demo-worker")[0])["spec"]
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
    start_all(fake, "demo-chief", "demo-worker")
    for task in ("demo-chief-0", "demo-worker-0", "demo-worker-1"):
        fake.pod_logs["default", running(fake, task)] = f"hello from {task}\n"
    assert list(backend.logs("demo", "demo-worker-1")) == ["hello from demo-worker-1"]
    assert list(backend.logs("demo"))[0] == "demo-chief-0 | hello from demo-chief-0"
    with pytest.raises(LaunchError, match="no pod for task 'demo-worker-7'"):
        list(backend.logs("demo", "demo-worker-7"))

    pod = running(fake, "demo-chief-0")
    stream = backend.logs("demo", "demo-chief-0", follow=True)
    assert next(stream) == "hello from demo-chief-0"

    def finish() -> None:
        fake.pod_logs["default", pod] += "epoch 1\nbye\n"
        fake.finish_pod(pod, 0)

    finish()  # while the stream follows: it was shown the first line
    assert list(stream) == ["epoch 1", "bye"]  # ends when the pod ends

    everyone = backend.logs("demo", follow=True)
    for task in ("demo-worker-0", "demo-worker-1"):
        fake.finish_pod(running(fake, task), 0)
    assert sorted(everyone) == [
        "demo-chief-0 | bye", "demo-chief-0 | epoch 1", "demo-chief-0 | hello from demo-chief-0",
        "demo-worker-0 | hello from demo-worker-0", "demo-worker-1 | hello from demo-worker-1",
    ]


def test_unknown_cluster(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    assert backend.describe("nope") is None
    assert backend.watch_round("nope") == []
    backend.cancel("nope")


def test_unreachable_api_server_is_a_launch_error() -> None:
    api_client = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    api_client.configuration.retries = 0
    with pytest.raises(LaunchError, match="unreachable"):
        KubernetesBackend(api_client).describe("demo")


def test_launcher_rbac_role_allows_every_request_the_backend_makes(fake: FakeKubernetes) -> None:
    backend = backend_for(fake, gang_grace=0, linger=0)
    fake.create("configmaps", "default", OUR_CONFIG_MAP)  # exercises replace
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief", "demo-worker")
    fake.now += 5
    fake.finish_pod(running(fake, "demo-worker-1"), 137)
    assert backend.watch_round("demo")  # deletes the survivors' pods
    fake.reconcile("demo-chief")  # the Job controller replaces the deleted chief
    fake.finish_pod(running(fake, "demo-chief-0"), 0)
    fake.reconcile("demo-chief")
    assert backend.watch_round("demo") == ["run succeeded: deleted Job demo-worker"]
    list(backend.logs("demo"))
    _open_board(fake, backend)
    backend.cancel("demo", volumes=True)
    allowed, used = rbac_allowed(), rbac_used(fake)
    assert used <= allowed, used - allowed
    assert {("", "pods", "delete"), ("batch", "jobs", "delete"), ("", "pods/log", "get"), ("", "configmaps", "update")} <= used
    unused = {(g, r, v) for g, r, v in allowed} - used
    assert unused <= {("", "serviceaccounts", "update"), ("", "services", "update"), ("networking.k8s.io", "networkpolicies", "update"),
                      ("", "serviceaccounts", "get"), ("", "services", "get"), ("networking.k8s.io", "networkpolicies", "get"),
                      ("", "persistentvolumeclaims", "get"), ("", "persistentvolumeclaims", "update"),
                      ("apps", "deployments", "update"), ("", "pods/portforward", "create"),
                      ("batch", "jobs", "patch"), ("", "pods/exec", "get"), ("", "pods/exec", "create"),
                      *RBAC_OBJECTS},\
        unused  # jobs patch and pods/exec: the stall watchdog and debug (test_k8s_stall.py); RBAC: the next test


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
    assert RBAC_OBJECTS - used == {("rbac.authorization.k8s.io", "rolebindings", verb) for verb in ("get", "update")}


def test_no_kubeconfig_is_backend_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(BackendUnavailable, match="KUBECONFIG"):
        KubernetesBackend.create(KubernetesOptions())


def _kubeconfig(fake: FakeKubernetes, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
        "users": [{"name": "dev", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "dev"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_cli_up_detached_status_logs_down_via_kubeconfig(
    fake: FakeKubernetes, cli, write_spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(fake, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec = write_spec({"name": "cli", "roles": {"chief": {}, "worker": {"replicas": 1}}, "kubernetes": {"namespace": "ml"}})
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 0, result.output
    assert "warning: nothing supervises" not in result.output  # its supervisor runs in the cluster
    assert fake.get("jobs", "cli-supervisor", "ml") is not None
    assert registry.lookup("cli")[1] == {"namespace": "ml"}
    fake.start_pods("cli-chief", "ml")
    result = cli.invoke(main, ["status", "cli", "-o", "json"])
    assert result.exit_code == 0 and '"state": "pending"' in result.output  # worker not started yet
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 1 and "already exists in namespace 'ml'" in result.output
    result = cli.invoke(main, ["down", "cli", "--volumes"])
    assert result.exit_code == 0
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 1 and "still shutting down" in result.output
    fake.now += 1
    assert not fake.objects
    result = cli.invoke(main, ["watch", "cli", "-b", "k8s"])
    assert result.exit_code == 1 and "no cluster named 'cli'" in result.output


def test_cli_up_detached_warns_when_its_dry_run_says_only_a_watch_supervises_it(
    fake: FakeKubernetes, cli, write_spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(fake, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec = write_spec({"name": "cli", "roles": {"chief": {}, "worker": {"replicas": 1}},
                       "kubernetes": {"namespace": "ml", "supervisor": False}})
    result = cli.invoke(main, ["up", str(spec), "--backend", "k8s", "--detach"])
    assert result.exit_code == 0, result.output
    assert "warning: nothing supervises cli while detached and it has no deadline_seconds" in result.output
    assert fake.get("jobs", "cli-supervisor", "ml") is None


def test_watch_runs_supervise_until_the_run_ends(fake: FakeKubernetes) -> None:
    backend = backend_for(fake, linger=0)
    launch_pss_until_chief_succeeds(fake, backend)
    assert watch(backend, "pss") == 0
    assert fake.get("jobs", "pss-ps")["metadata"]["deletionTimestamp"]
    fake.now += 1
    assert fake.get("jobs", "pss-ps") is None and fake.get("jobs", "pss-worker") is None


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


def test_tensorboard_deployment_is_owned_by_the_run_and_reached_through_a_port_forward(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO, "run-1"))
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
    data = {run: fake.get("configmaps", f"{run}-tfconfig")["data"] for run in runs}
    board = shared_board([BoardRun.stored(run, data[run]) for run in runs], stored_board(runs[0], data[runs[0]]))
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
    assert fake.get("jobs", "demo-chief") is not None and fake.get("configmaps", "demo-tfconfig") is not None


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


def describe_without_board(fake: FakeKubernetes) -> list[object]:
    """The run's task statuses computed from its task pods only."""
    from launcher.backends.kubernetes import status as k8s_status

    jobs = fake.list("jobs", selector={naming.LABEL_CLUSTER: "demo"})
    pods = fake.list("pods", selector={naming.LABEL_CLUSTER: "demo"})
    return k8s_status.job_status("demo", jobs, pods).tasks


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


def test_tensorboard_of_an_unknown_or_summary_less_run_is_a_one_line_error(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    with pytest.raises(LaunchError, match="no cluster named 'nope'"):
        backend.tensorboard(["nope"], "127.0.0.1", free_port())
    backend.submit(dry_run_for({**PSS, "tensorboard": {"enabled": False}}, "run-1"))
    with pytest.raises(LaunchError, match="tensorboard.enabled: false"):
        backend.tensorboard(["pss"], "127.0.0.1", free_port())



def test_status_says_why_a_pod_is_not_scheduled_from_the_pod_itself(fake: FakeKubernetes) -> None:
    """A Pending pod's reason is in its own status (the scheduler's PodScheduled condition, the kubelet's waiting
    reason such as ImagePullBackOff): the launcher's Role needs no access to Events."""
    backend = backend_for(fake)
    backend.submit(dry_run_for(DEMO))
    start_all(fake, "demo-chief", "demo-worker")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/1 nodes are available: 1 Insufficient cpu."}

    def pending(obj: dict) -> None:
        obj["status"] = {"phase": "Pending", "conditions": [unschedulable]}

    fake.update("pods", "default", running(fake, "demo-worker-1"), pending)
    [task] = [t for t in backend.describe("demo").tasks if t.name == "demo-worker-1"]
    assert (task.state, task.message) == (State.PENDING, "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.")
