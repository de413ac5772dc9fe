"""The fake Kubernetes API (``fakes.kubernetes_api``) and a real cluster answer alike: one contract, two sides.

Each test runs against both sides (the ``side`` fixture): the fake, always (the fast lane), and the real
cluster of ``TFCLUSTER_E2E_KUBECONFIG`` (marked ``e2e``: skipped without one, failing under CI once e2e is
required, ``helpers.required``), in the namespace and with the image of the e2e tests (``helpers.k8s_e2e``).
The requests are the backend's own (its typed client ``KubernetesBackend.api``, ``pod_io.exec_in_task``),
made as the launcher's Role allows (Jobs create the pods; no Job is replaced, only merge-patched).

A Job is shaped as tfcluster renders a task's (``manifests.task_job``: not Indexed, one pod, ``backoffLimit: 0``,
``podReplacementPolicy: Failed``, maybe suspended) and its pod runs a ``Program``: on the real side a small Python
program in the worker image (under its tini), on the fake side the same ending played by the test's stand-ins for
the kubelet and the Job controller (``FakeSide.step``; a command run in a pod runs here, a port-forward reaches an
echo server here). What the two sides must agree on is what the backend reads: Job conditions and their reasons,
the selector and labels the API server gives a Job and its pod, ``startTime``, pods' phases, exit codes (a deleted
pod's: SIGTERM even at grace 0, SIGKILL only after the grace and the kubelet's 2 s; OOMKilled), deletion marks and
finalizers (a pod on a lost node stays terminating), why a pod waits (``Unschedulable``, ``ImagePullBackOff``), the
Job controller's replacements (``backoffLimit``, ``podFailurePolicy`` on exit codes and on an eviction's
``DisruptionTarget``), the garbage collector (Background, Foreground, Orphan), the admissions (a missing
ServiceAccount: no pod until it exists; the token mount), API errors (403 for a right the launcher's Role lacks:
both sides hold to it, 404, 409, 422), logs, exec's output and exit code, and bytes through a port-forward. The
real side evicts and makes a Node (one no kubelet serves, for the lost node) as the cluster's administrator
(``helpers.k8s_e2e.admin_kubeconfig``). A difference fails one side: fix the fake, or list what cannot be
modelled in the fake's docstring.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socketserver
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from fakes.kubernetes_api import IGNORES_SIGTERM, SAVES_AND_EXITS, SIGKILL_EXIT, TOKEN_PATH, FakeKubernetes, OnSigterm
from helpers.k8s_e2e import admin_kubeconfig, image, namespace, until
from helpers.k8s_fake import backend_for, rbac_allowed
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from launcher.backends.kubernetes import admission_policy, kubeapi, manifests, pod_admission, pod_io, quota, runtime
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.kubeapi import ClusterKind, Kind, KubeApi
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.backends.kubernetes.status import CONTROLLER_UID, PodView
from launcher.backends.kubernetes.supervisor_objects import POD_FAILURE_POLICY
from launcher.backends.pyspy import Ran
from launcher.backends.tensorboard import PORT
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.protocol.exitcodes import ExitCode

Obj = dict[str, Any]
T = TypeVar("T")
#: The resource a cluster-scoped kind's RBAC refusal names.
CLUSTER_PLURALS = {ClusterKind.NAMESPACE: "namespaces", ClusterKind.POLICY_BINDING: "validatingadmissionpolicybindings"}

#: The label every object of this file carries (the tests select their pods by it).
LABEL = "tfcluster.test/contract"
#: How long the real cluster may take for one expected state (a loaded host: scheduling, container start, backoff).
REAL_SECONDS = 300.0
#: How many steps of the fake's controllers (one fake second each) an expected state may take.
FAKE_STEPS = 120
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
#: The memory limit (MiB) of an ``oom`` program's container.
OOM_MEMORY = 64
#: An image no registry serves (nothing listens on port 1: every pull fails at once).
MISSING_IMAGE = "127.0.0.1:1/tfcluster-contract/missing:none"


@dataclass(frozen=True)
class Program:
    """What one index's process does: writes ``output``, then exits ``code`` (None: runs until stopped; ``serves``:
    echoes what it receives on ``PORT`` meanwhile; ``oom``: fills more memory than its container's limit, and
    the kernel's OOM killer ends it). On SIGTERM it dies of it (143 under tini) unless
    ``on_sigterm`` says it saves for some seconds and exits with its own code, or ignores SIGTERM (``seconds=None``)."""

    code: int | None = None
    output: str = ""
    on_sigterm: OnSigterm = SAVES_AND_EXITS
    serves: bool = False
    oom: bool = False

    def source(self) -> str:
        """The program as Python source, for the real side's container."""
        lines = ["import signal, socket, sys, time", f"sys.stdout.write({self.output!r}); sys.stdout.flush()"]
        if self.on_sigterm.seconds is None:
            lines.append("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
        elif self.on_sigterm != SAVES_AND_EXITS:
            lines += ["def stop(*_):", f"    time.sleep({self.on_sigterm.seconds}); sys.exit({self.on_sigterm.code})",
                      "signal.signal(signal.SIGTERM, stop)"]
        if self.oom:
            lines.append(f"hog = b'x' * ({OOM_MEMORY} << 21)")  # written, so resident: twice the limit
        if self.code is not None:
            lines.append(f"sys.exit({self.code})")
        elif self.serves:
            lines += [f"s = socket.create_server(('0.0.0.0', {PORT}))",
                      "while True:",
                      "    c, _ = s.accept()",
                      "    while (d := c.recv(65536)): c.sendall(d)",
                      "    c.close()"]
        else:
            lines.append("while True: signal.pause()")
        return "\n".join(lines)


def job(name: str, program: Program, pod: Obj | None = None, container: Obj | None = None, **spec: Any) -> Obj:
    """A Job shaped as a task's (``manifests.task_job``: one pod, ``restartPolicy: Never``, no retries unless
    ``spec`` says) whose pod runs ``program``, fit for the ``restricted`` Pod Security Standard; ``pod``: fields of
    its pod template's spec, ``container``: of its container (an ``oom`` program's gets its memory limit)."""
    if program.oom:
        container = {"resources": {"limits": {"memory": f"{OOM_MEMORY}Mi"}, "requests": {"memory": f"{OOM_MEMORY}Mi"}},
                     **(container or {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {LABEL: name, naming.LABEL_MANAGED: naming.MANAGER, naming.LABEL_CLUSTER: name}},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "podReplacementPolicy": "Failed",
            **spec,
            "template": {
                "metadata": {"labels": {LABEL: name}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": CONTAINER,
                        "image": image(),
                        "imagePullPolicy": "IfNotPresent",
                        "args": ["python", "-c", program.source()],  # the image's entrypoint (tini) runs it
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                            "readOnlyRootFilesystem": True, "runAsNonRoot": True},
                        **(container or {}),
                    }],
                    **(pod or {}),
                },
            },
        },
    }


@dataclass
class Side:
    """One API server and how the test waits on it; ``until`` is the only way time passes."""

    name: str
    backend: KubernetesBackend
    namespace: str = "default"
    created: list[tuple[Kind, str]] = field(default_factory=list)

    def unique(self, what: str) -> str:
        return f"h18-{what}-{uuid.uuid4().hex[:5]}"

    @property
    def api(self) -> KubeApi:
        return self.backend.api

    def create(self, kind: Kind, obj: Obj) -> Obj:
        made = self.api.create(kind, self.namespace, obj)
        self.created.append((kind, obj["metadata"]["name"]))
        return made

    def run(self, name: str, program: Program, pod: Obj | None = None, container: Obj | None = None, **spec: Any) -> Obj:
        return self.create(Kind.JOB, job(name, program, pod, container, **spec))

    def evict(self, pod: str) -> None:
        """Evict ``pod`` (the Eviction API, as a drain does: a right of the cluster's administrator)."""
        raise NotImplementedError

    def lost_node(self) -> str:
        """The name of a node whose kubelet is gone (tainted ``NoSchedule``: only a pod bound to it lands there)."""
        raise NotImplementedError

    def quota(self, name: str, hard: dict[str, str]) -> None:
        """A ResourceQuota of the namespace (its administrator's: the launcher only lists them), removed by ``close``."""
        raise NotImplementedError

    def deploy(self, name: str) -> None:
        """A Deployment of one pod that runs until stopped (as a TensorBoard's)."""
        template = job(name, Program())["spec"]["template"]
        template["spec"]["restartPolicy"] = "Always"
        template["spec"]["containers"][0]["args"] = ["python", "-c", Program().source()]
        self.create(Kind.DEPLOYMENT, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {LABEL: name}},
                                   "spec": {"replicas": 1, "selector": {"matchLabels": {LABEL: name}}, "template": template}})

    def jobs(self, name: str) -> list[Obj]:
        return self.api.select(Kind.JOB, self.namespace, f"{LABEL}={name}")

    def the_job(self, name: str) -> Obj | None:
        jobs = self.jobs(name)
        return jobs[0] if jobs else None

    def pods(self, name: str) -> list[Obj]:
        """The pods of the Job ``name`` (of every Job of that name), oldest first."""
        pods = self.api.select(Kind.POD, self.namespace, f"{LABEL}={name}")
        return sorted(pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))

    def until(self, what: str, check: Callable[[], T | None]) -> T:
        raise NotImplementedError

    def now(self) -> float:
        """The side's clock, as the backend's ``clock`` reads it."""
        raise NotImplementedError

    def close(self) -> None:
        """Delete what the test created (a Job with its pods); what is gone already is fine."""
        from kubernetes.client.exceptions import ApiException

        for kind, name in reversed(self.created):
            try:
                self.api.delete(kind, name, self.namespace, propagation="Foreground" if kind is Kind.JOB else "Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise


class RealSide(Side):
    nodes: list[str]
    quotas: list[str]

    def now(self) -> float:
        return time.time()

    def admin(self) -> Any:
        """The administrator's ``CoreV1Api``."""
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=admin_kubeconfig()))

    def evict(self, pod: str) -> None:
        from kubernetes import client

        self.admin().create_namespaced_pod_eviction(pod, self.namespace, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod, namespace=self.namespace)))

    def lost_node(self) -> str:
        """A Node object that no kubelet serves (deleted by ``close``; the pods bound to it then go too: the pod
        garbage collector's orphans)."""
        name = self.unique("lost-node")
        self.admin().create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {LABEL: name}},
                                  "spec": {"taints": [{"key": LABEL, "value": "lost", "effect": "NoSchedule"}]}})
        self.nodes.append(name)
        return name

    def quota(self, name: str, hard: dict[str, str]) -> None:
        self.admin().create_namespaced_resource_quota(self.namespace, {"metadata": {"name": name}, "spec": {"hard": hard}})
        self.quotas.append(name)

    def close(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            super().close()
        finally:
            for name in self.quotas:
                self.admin().delete_namespaced_resource_quota(name, self.namespace)
            for node in self.nodes:
                try:
                    self.admin().delete_node(node)
                except ApiException as exc:
                    if exc.status != 404:
                        raise

    def until(self, what: str, check: Callable[[], T | None]) -> T:
        found: T = until(f"{self.name}: {what}", check, REAL_SECONDS, every=0.5)
        return found


class FakeSide(Side):
    """The fake, with the test's stand-ins for the Job controller and the kubelet playing each index's ``Program``."""

    fake: FakeKubernetes
    programs: dict[str, Program]
    deployments: list[str]
    echo: tuple[str, int]
    lost: set[str]

    def lost_node(self) -> str:
        name = self.unique("lost-node")
        self.lost.add(name)
        return name

    def quota(self, name: str, hard: dict[str, str]) -> None:
        self.fake.create("resourcequotas", self.namespace, {"metadata": {"name": name}, "spec": {"hard": hard}})

    def deploy(self, name: str) -> None:
        super().deploy(name)
        self.deployments.append(name)

    def now(self) -> float:
        return self.fake.now

    def evict(self, pod: str) -> None:
        self.fake.evict(pod, self.namespace)

    def run(self, name: str, program: Program, pod: Obj | None = None, container: Obj | None = None, **spec: Any) -> Obj:
        made = super().run(name, program, pod, container, **spec)
        self.programs[name] = program
        self.fake.on_sigterm[name] = program.on_sigterm
        self.fake.pod_exec[name] = _run_here
        return made

    def step(self) -> None:
        """What the cluster's controllers and kubelet do in one second, then the clock moves on."""
        for name in self.deployments:
            if self.fake.get("deployments", name, self.namespace) is not None and not self.fake.list("pods", self.namespace, {LABEL: name}):
                self.fake.roll_out(name, self.namespace)
        self.fake.sync_jobs(self.namespace)
        for name, program in self.programs.items():
            for pod in self.fake.list("pods", self.namespace, {LABEL: name}):
                pod_name = pod["metadata"]["name"]
                if pod["spec"].get("nodeName") in self.lost:
                    self.fake.unreachable.add(pod_name)
                    continue
                self.fake.pod_logs.setdefault((self.namespace, pod_name), program.output)
                if program.serves:
                    self.fake.pod_ports[self.namespace, pod_name, PORT] = self.echo
                if pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
                    continue
                if program.oom:
                    self.fake.finish_pod(pod_name, SIGKILL_EXIT, reason="OOMKilled", namespace=self.namespace)
                elif program.code is not None:
                    self.fake.finish_pod(pod_name, program.code, namespace=self.namespace)
        self.fake.sync_jobs(self.namespace)
        self.fake.now += 1

    def until(self, what: str, check: Callable[[], T | None]) -> T:
        for _ in range(FAKE_STEPS):
            value = check()
            if value:
                return value
            self.step()
        pytest.fail(f"{self.name}: no {what} after {FAKE_STEPS} steps")


def _run_here(command: list[str]) -> tuple[int, str, str]:
    """A command "run in the pod" of the fake: run on this machine."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.e2e)])
def side(request: pytest.FixtureRequest) -> Iterator[Side]:
    if request.param == "real":
        kubeconfig = os.environ.get("TFCLUSTER_E2E_KUBECONFIG")
        if not kubeconfig:
            unavailable("needs a real cluster: set TFCLUSTER_E2E_KUBECONFIG", "e2e")
        from kubernetes import config

        real = RealSide("real cluster", KubernetesBackend(config.new_client_from_config(config_file=kubeconfig), namespace()),
                        namespace=namespace())
        real.nodes, real.quotas = [], []
        yield real
        real.close()
        return
    fake = FakeKubernetes()
    fake.allowed = rbac_allowed()  # as the real side's identity: bound to the launcher's Role only
    fake.missing_images.add(MISSING_IMAGE)
    fake.url = fake.start()  # type: ignore[attr-defined]
    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    faked = FakeSide("fake", backend_for(fake, "default"))
    faked.fake, faked.programs, faked.deployments, faked.echo, faked.lost = fake, {}, [], echo.server_address[:2], set()
    yield faked
    echo.shutdown()
    echo.server_close()
    fake.stop()


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """The true condition ``kind`` of a Job or pod."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind and cond["status"] == "True":
            return cond
    return None


def true_conditions(obj: Obj) -> set[str]:
    return {c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"}


def terminated(pod: Obj) -> Obj | None:
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == CONTAINER:
            return (status.get("state") or {}).get("terminated")
    return None


def running(side: Side, name: str) -> Obj:
    """The Job's newest pod, once its container runs."""
    def check() -> Obj | None:
        pods = side.pods(name)
        statuses = pods[-1]["status"].get("containerStatuses") or [] if pods else []
        return pods[-1] if statuses and "running" in (statuses[0].get("state") or {}) else None
    return side.until(f"running pod of {name}", check)


def ended(side: Side, name: str, final: str) -> Obj:
    """The Job once it has its final condition ``final`` (``Complete`` or ``Failed``)."""
    return side.until(f"{final} Job {name}", lambda: side.the_job(name) if condition(side.the_job(name), final) else None)


def api_error(call: Callable[[], Any]) -> tuple[int, Obj]:
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


# --- API errors ---------------------------------------------------------------------------------------------------


def test_a_right_the_role_lacks_is_403_and_the_launcher_says_which_in_one_line(side: Side) -> None:
    name = side.unique("forbidden")
    made = side.run(name, Program(code=0))
    replace = lambda: side.api.replace(Kind.JOB, name, side.namespace, made)  # noqa: E731  (the Role patches Jobs, never updates one)
    status, body = api_error(replace)
    assert (status, body["reason"]) == (403, "Forbidden"), body
    with pytest.raises(LaunchError) as caught, side.api.errors(f"replace Job {name}"):
        replace()
    shown = str(caught.value)
    assert "\n" not in shown and shown.startswith(f"cannot replace Job {name}: 403 Forbidden: "), shown
    assert f'cannot update resource "jobs" in API group "batch" in the namespace "{side.namespace}"' in shown, shown


def test_the_launcher_cannot_read_its_namespace_nor_the_admission_binding_and_up_stays_silent(side: Side) -> None:
    """A namespace's Role grants no cluster-scoped read: the launcher's GET of its Namespace and of the supervisor's
    ValidatingAdmissionPolicyBinding are 403 on both sides, and ``admission_policy.unguarded`` (``up``'s look) answers
    False, no warning. On the fake the namespace exists without the ``restricted`` label and no binding does: a fake
    that answered the launcher would make ``unguarded`` True. The real side's administrator reads the same Namespace
    (the 403 is the Role's, not a missing object)."""
    if isinstance(side, FakeSide):
        side.fake.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": side.namespace}})
    else:
        assert isinstance(side, RealSide)
        assert side.admin().read_namespace(side.namespace).metadata.name == side.namespace
    for kind, name in ((ClusterKind.NAMESPACE, side.namespace), (ClusterKind.POLICY_BINDING, admission_policy.POLICY)):
        status, body = api_error(lambda: side.api.read_cluster_scoped(kind, name))  # noqa: B023  (called at once)
        assert (status, body["reason"]) == (403, "Forbidden"), (kind, body)
        assert f'cannot get resource "{CLUSTER_PLURALS[kind]}"' in body["message"], body
    assert admission_policy.unguarded(side.api, side.namespace) is False


def test_missing_objects_are_404_and_a_second_create_is_409(side: Side) -> None:
    name = side.unique("errors")
    status, body = api_error(lambda: side.api.read(Kind.CONFIG_MAP, name, side.namespace))
    assert (status, body["reason"], body["code"]) == (404, "NotFound", 404)
    status, body = api_error(lambda: side.api.delete(Kind.CONFIG_MAP, name, side.namespace))
    assert (status, body["reason"]) == (404, "NotFound")
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {LABEL: name}}, "data": {"a": "1"}}
    made = side.create(Kind.CONFIG_MAP, config_map)
    status, body = api_error(lambda: side.api.create(Kind.CONFIG_MAP, side.namespace, config_map))
    assert (status, body["reason"]) == (409, "AlreadyExists")
    # optimistic concurrency: a replace naming an old resourceVersion is a 409 Conflict; the current one goes through
    current = side.api.replace(Kind.CONFIG_MAP, name, side.namespace, {**config_map, "metadata": made["metadata"], "data": {"a": "2"}})
    assert current["metadata"]["resourceVersion"] != made["metadata"]["resourceVersion"]
    status, body = api_error(lambda: side.api.replace(Kind.CONFIG_MAP, name, side.namespace,
                                               {**config_map, "metadata": made["metadata"], "data": {"a": "3"}}))
    assert (status, body["reason"]) == (409, "Conflict")
    assert side.api.read(Kind.CONFIG_MAP, name, side.namespace)["data"] == {"a": "2"}
    missing = side.unique("missing")
    status, body = api_error(lambda: side.api.replace(Kind.CONFIG_MAP, missing, side.namespace,
                                               {**config_map, "metadata": {"name": missing, "resourceVersion": "1"}}))
    assert (status, body["reason"]) == (404, "NotFound")


def test_a_config_map_over_1_mib_of_data_is_422_and_one_of_1_mib_is_stored(side: Side) -> None:
    """The run's ConfigMap holds its published status beside its spec: ``cluster_state.status_text`` cuts the status
    to the room left, counting the values' bytes against ``CONFIG_MAP_LIMIT`` as the API server does."""
    name = side.unique("big")

    def config_map(size: int) -> Obj:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {LABEL: name}},
                "data": {"status.json": "x" * (size - 1), "spec.json": "y"}}

    status, body = api_error(lambda: side.api.create(Kind.CONFIG_MAP, side.namespace,
                                                     config_map(manifests.CONFIG_MAP_LIMIT + 1)))
    assert (status, body["reason"]) == (422, "Invalid"), body
    made = side.create(Kind.CONFIG_MAP, config_map(manifests.CONFIG_MAP_LIMIT))
    assert len(made["data"]["status.json"]) == manifests.CONFIG_MAP_LIMIT - 1


def test_a_job_whose_name_is_taken_is_409(side: Side) -> None:
    name = side.unique("taken")
    side.run(name, Program(), suspend=True)
    status, body = api_error(lambda: side.api.create(Kind.JOB, side.namespace, job(name, Program(), suspend=True)))
    assert (status, body["reason"]) == (409, "AlreadyExists")


@pytest.mark.parametrize(("change", "field_path"), [
    (lambda spec: spec["template"]["spec"].update(restartPolicy="Always"), "spec.template.spec.restartPolicy"),
    (lambda spec: spec.update(selector={"matchLabels": {LABEL: "x"}}), "spec.selector"),
], ids=["restart-always", "selector-not-generated"])
def test_an_invalid_job_is_422_naming_the_field(side: Side, change: Callable[[Obj], Any], field_path: str) -> None:
    name = side.unique("invalid")
    body = job(name, Program(code=0))
    change(body["spec"])
    status, answer = api_error(lambda: side.create(Kind.JOB, body))
    assert (status, answer["reason"]) == (422, "Invalid")
    assert field_path in answer["message"], answer["message"]
    assert not side.jobs(name)


def test_a_running_jobs_template_is_immutable_a_merge_patch_never_conflicts(side: Side) -> None:
    name = side.unique("immutable")
    side.run(name, Program())
    running(side, name)

    def patch(spec: Obj) -> Obj:
        """A merge patch of the Job's spec as ``KubernetesRuntime.start`` sends it: no resourceVersion, no 409."""
        return side.api.merge_patch(Kind.JOB, name, side.namespace, {"spec": spec})

    container = side.jobs(name)[0]["spec"]["template"]["spec"]["containers"][0]
    status, answer = api_error(lambda: patch({"template": {"spec": {"containers": [
        {**container, "args": ["python", "-c", "pass"]}]}}}))
    assert (status, answer["reason"]) == (422, "Invalid")
    assert "spec.template" in answer["message"] and "immutable" in answer["message"], answer["message"]
    # the Job controller writes the running Job's status meanwhile: a replace of the Job as listed could conflict
    for limit in (1, 2, 3):
        assert patch({"backoffLimit": limit})["spec"]["backoffLimit"] == limit


@pytest.mark.parametrize("automount", [True, False])
def test_the_service_account_admission_mounts_a_token_unless_told_not_to(side: Side, automount: bool) -> None:
    name = side.unique("token")
    side.run(name, Program(code=0), {"automountServiceAccountToken": automount})
    pod = side.until("a pod", lambda: (side.pods(name) or [None])[0])
    assert pod["spec"]["serviceAccountName"] == "default"
    volumes = [v["name"] for v in pod["spec"].get("volumes", []) if v["name"].startswith("kube-api-access-")]
    mounts = [m["mountPath"] for m in pod["spec"]["containers"][0].get("volumeMounts", []) if m["name"] in volumes]
    assert (len(volumes), mounts) == ((1, [TOKEN_PATH]) if automount else (0, []))


def test_a_pod_of_a_priority_class_that_does_not_exist_is_refused_and_a_dry_run_stores_nothing(side: Side) -> None:
    """What ``up`` and ``status`` ask (``pod_admission.refusal``, as the launcher's Role allows): the Priority admission
    refuses the pod in the API server's words; an admitted dry run answers the pod and keeps nothing."""
    name = side.unique("priority")
    pod = pod_admission.pod_of(job(name, Program(code=0), {"priorityClassName": "tfcluster-no-such-class"}))
    status, body = api_error(lambda: side.api.dry_run_create(Kind.POD, side.namespace, pod))
    assert (status, body["reason"]) == (403, "Forbidden"), body
    assert body["message"] == f'pods "{name}" is forbidden: no PriorityClass with name tfcluster-no-such-class was found'
    assert pod_admission.refusal(side.api, job(name, Program(code=0), {"priorityClassName": "tfcluster-no-such-class"}),
                                 side.namespace) == f"403 Forbidden: {body['message']}"
    assert pod_admission.refusal(side.api, job(name, Program(code=0)), side.namespace) is None
    assert side.api.read_if_exists(Kind.POD, name, side.namespace) is None  # a dry run: nothing stored


def test_a_namespaces_quotas_are_listed_with_their_hard_limits_by_the_launcher(side: Side) -> None:
    """What ``up`` reads of a quota (``quota.never_admitted``: the launcher's Role lists them): a limit on an
    extended resource no other test's pod asks for, which a pod asking for twice as much could never get."""
    name = side.unique("quota")
    side.quota(name, {"requests.nvidia.com/gpu": "1"})
    asks = {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}
    lines = quota.never_admitted(side.api, [asks], side.namespace)
    assert any(line.startswith(f"ResourceQuota {name} can never admit the run's 1 pods at once "
                               "(requests.nvidia.com/gpu 2 > 1:") for line in lines), lines


def test_a_pod_no_node_has_the_memory_for_stays_pending_unschedulable_saying_so(side: Side) -> None:
    """What ``status`` shows of a run that cannot be placed: the pod's ``PodScheduled`` condition, in the scheduler's
    words."""
    name = side.unique("unschedulable")
    made = job(name, Program())
    made["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"memory": "1000Ti"},
                                                                      "limits": {"memory": "1000Ti"}}
    side.create(Kind.JOB, made)
    if isinstance(side, FakeSide):
        side.fake.node_memory = 64 * 2**30
    pod = side.until("an unschedulable pod", lambda: next((p for p in side.pods(name) if condition_false(p, "PodScheduled")),
                                                          None))
    assert pod["status"]["phase"] == "Pending"
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable", scheduled
    assert re.match(r"0/\d+ nodes are available: (.*, )?1 Insufficient memory[.,]", scheduled["message"]), scheduled


def condition_false(obj: Obj, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "False" for c in (obj.get("status") or {}).get("conditions") or [])


# --- the Job controller -------------------------------------------------------------------------------------------


def test_a_suspended_job_has_no_pod_until_resumed_then_one_selected_by_the_jobs_uid(side: Side) -> None:
    """How a task starts (``KubernetesRuntime.start``): its Job rendered suspended, then ``suspend: false``."""
    name = side.unique("suspended")
    made = side.run(name, Program(), {"hostname": "the-task"}, suspend=True)
    uid = made["metadata"]["uid"]
    assert made["spec"]["selector"] == {"matchLabels": {runtime.CONTROLLER_UID: uid}}
    labels = made["spec"]["template"]["metadata"]["labels"]
    assert {k: labels.get(k) for k in (runtime.CONTROLLER_UID, "controller-uid", "batch.kubernetes.io/job-name", "job-name", LABEL)} == {
        runtime.CONTROLLER_UID: uid, "controller-uid": uid, "batch.kubernetes.io/job-name": name, "job-name": name, LABEL: name}
    suspended = side.until("the Suspended condition", lambda: condition(side.the_job(name), "Suspended"))
    assert suspended["reason"] == "JobSuspended"
    assert side.pods(name) == [] and not side.the_job(name)["status"].get("startTime")
    resumed = side.api.merge_patch(Kind.JOB, name, side.namespace, {"spec": {"suspend": False}})
    assert resumed["metadata"]["uid"] == uid
    pod = running(side, name)
    assert {k: pod["metadata"]["labels"].get(k) for k in (runtime.CONTROLLER_UID, "job-name", LABEL)} == {
        runtime.CONTROLLER_UID: uid, "job-name": name, LABEL: name}
    assert pod["spec"]["hostname"] == "the-task"
    assert [ref["uid"] for ref in pod["metadata"]["ownerReferences"]] == [uid]
    assert TRACKING_FINALIZER in pod["metadata"].get("finalizers", [])
    job_ = side.the_job(name)
    assert job_["status"].get("startTime")
    assert not condition(job_, "Suspended") and [c["reason"] for c in job_["status"]["conditions"] if c["type"] == "Suspended"] == ["JobResumed"]


def test_a_succeeded_pod_completes_the_job(side: Side) -> None:
    name = side.unique("complete")
    side.run(name, Program(code=0))
    done = ended(side, name, "Complete")
    assert {"SuccessCriteriaMet", "Complete"} <= true_conditions(done)
    assert condition(done, "Complete")["reason"] == "CompletionsReached"
    assert done["status"].get("succeeded") == 1 and done["status"].get("completionTime")
    [pod] = side.pods(name)
    assert (pod["status"]["phase"], terminated(pod)["exitCode"]) == ("Succeeded", 0)


def test_a_failed_pod_fails_a_job_without_retries_and_is_not_replaced(side: Side) -> None:
    name = side.unique("failed")
    side.run(name, Program(code=3))
    failed = ended(side, name, "Failed")
    assert {"FailureTarget", "Failed"} <= true_conditions(failed)
    cond = condition(failed, "Failed")
    assert (cond["reason"], cond["message"]) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert failed["status"].get("failed") == 1
    [pod] = side.pods(name)
    assert (pod["status"]["phase"], terminated(pod)["exitCode"], terminated(pod)["reason"]) == ("Failed", 3, "Error")


@pytest.mark.parametrize("grace", [0, 1])
def test_a_pod_deleted_with_grace_gets_sigterm_and_fails_its_job_unreplaced(side: Side, grace: int) -> None:
    """``KubernetesRuntime.stop``: a deleted pod of a Job of ``backoffLimit: 0`` ends (SIGTERM; even a grace-0
    deletion is no SIGKILL), the Job controller counts it before it goes (its tracking finalizer) and fails the
    Job; ``podReplacementPolicy: Failed`` starts no pod meanwhile, and none after."""
    name = side.unique(f"grace{grace}")
    side.run(name, Program())
    pod = running(side, name)["metadata"]["name"]
    deleted = side.api.delete(Kind.POD, pod, side.namespace, grace_seconds=grace)
    assert deleted["metadata"].get("deletionTimestamp") and deleted["metadata"].get("deletionGracePeriodSeconds") == grace
    assert TRACKING_FINALIZER in deleted["metadata"].get("finalizers", [])
    cond = condition(ended(side, name, "Failed"), "Failed")
    assert cond["reason"] == "BackoffLimitExceeded", cond
    side.until("the deleted pod gone", lambda: not side.pods(name) or None)
    assert side.the_job(name)["status"].get("failed") == 1


def supervisor_policy() -> Obj:
    """``supervisor_objects.POD_FAILURE_POLICY`` with its container named as this file's Jobs'."""
    return {"rules": [{**rule, "onExitCodes": {**rule["onExitCodes"], "containerName": CONTAINER}}
                      if "onExitCodes" in rule else rule for rule in POD_FAILURE_POLICY["rules"]]}


def replaced_or_failed(side: Side, name: str, pod: str) -> str | None:
    """How the Job ``name`` answered the end of its pod ``pod``: "failed", "replaced" (another pod), or None yet."""
    if condition(side.the_job(name), "FailureTarget") or condition(side.the_job(name), "Failed"):
        return "failed"
    return "replaced" if any(p["metadata"]["name"] != pod for p in side.pods(name)) else None


def test_a_pod_the_supervisors_failure_policy_ignores_is_replaced_and_not_counted(side: Side) -> None:
    """``supervisor_objects.POD_FAILURE_POLICY``: a pod that exits 143 (a supervisor that left on SIGTERM) is
    replaced by a Job of ``backoffLimit: 0``, which neither fails nor counts it."""
    name = side.unique("ignored")
    side.run(name, Program(code=int(ExitCode.PREEMPTED)), podFailurePolicy=supervisor_policy())
    side.until("a second pod", lambda: len(side.pods(name)) >= 2 or None)
    job_ = side.the_job(name)
    assert not condition(job_, "Failed") and not condition(job_, "FailureTarget") and not job_["status"].get("failed"), job_


def test_an_evicted_pod_the_supervisors_failure_policy_ignores_by_its_disruption_is_replaced(side: Side) -> None:
    """``supervisor_objects.POD_FAILURE_POLICY``'s other rule: an evicted pod (a drain) carries the condition
    ``DisruptionTarget`` (``runtime._disruption`` reads its reason), so even a failing exit (1 here, not 143) is
    ignored: the pod is replaced and the Job of ``backoffLimit: 0`` neither fails nor counts it."""
    name = side.unique("evicted")
    side.run(name, Program(on_sigterm=OnSigterm(seconds=0, code=1)), podFailurePolicy=supervisor_policy())
    pod = running(side, name)["metadata"]["name"]
    side.evict(pod)
    assert side.until("the evicted pod replaced, or the Job failed", lambda: replaced_or_failed(side, name, pod)) == "replaced"
    job_ = side.the_job(name)
    assert not condition(job_, "FailureTarget") and not job_["status"].get("failed"), job_
    evicted = [p for p in side.pods(name) if p["metadata"]["name"] == pod]
    if evicted:  # still there: it was counted (ignored), not yet gone
        assert condition(evicted[0], "DisruptionTarget")["reason"] == "EvictionByEvictionAPI", evicted[0]


def test_an_evicted_task_pod_fails_its_job_by_the_disruption_rule_which_the_job_keeps(side: Side) -> None:
    """``manifests.DISRUPTED``: a task Job's evicted pod (``backoffLimit: 0``) fails the Job with reason
    ``PodFailurePolicy`` and a message naming the condition, which the Job keeps once the pod is gone
    (``runtime._failed_by_disruption``: the next supervisor reads a preemption there)."""
    name = side.unique("disrupted")
    side.run(name, Program(on_sigterm=OnSigterm(seconds=0, code=1)), podFailurePolicy=manifests.DISRUPTED)
    pod = running(side, name)["metadata"]["name"]
    side.evict(pod)
    failed = condition(ended(side, name, "Failed"), "Failed")
    assert failed["reason"] == "PodFailurePolicy", failed
    assert failed["message"] == (f"Pod {side.namespace}/{pod} has condition DisruptionTarget matching FailJob rule "
                                 "at index 0"), failed
    assert runtime._failed_by_disruption(failed)


def test_a_failed_pod_is_replaced_until_the_backoff_limit_is_spent(side: Side) -> None:
    """A Job whose ``backoffLimit`` allows a retry (the supervisor's, ``BACKOFF_LIMIT``) replaces a failed pod,
    counts each, and fails with the last (the real Job controller after its back-off delay, 10 s)."""
    name = side.unique("backoff")
    side.run(name, Program(code=3), backoffLimit=1)
    failed = ended(side, name, "Failed")
    assert (condition(failed, "Failed")["reason"], failed["status"].get("failed")) == ("BackoffLimitExceeded", 2)
    assert [(p["status"]["phase"], terminated(p)["exitCode"]) for p in side.pods(name)] == [("Failed", 3)] * 2


def test_a_job_deleted_in_the_background_goes_at_once_and_its_name_is_free(side: Side) -> None:
    """``KubernetesRuntime.start`` of a Job that ran: deleted (Background), then its ``fresh_copy`` created under
    the same name while the old pod still ends; each Job's pods carry its own uid."""
    name = side.unique("again")
    side.run(name, Program(on_sigterm=OnSigterm(seconds=3, code=143)), suspend=True)
    side.api.merge_patch(Kind.JOB, name, side.namespace, {"spec": {"suspend": False}})
    old = running(side, name)
    first = side.the_job(name)
    side.api.delete(Kind.JOB, name, side.namespace, propagation="Background")
    assert side.the_job(name) is None
    from kubernetes.client.exceptions import ApiException

    def created() -> Obj | None:
        try:
            return side.create(Kind.JOB, runtime.fresh_copy(first))
        except ApiException as exc:
            if exc.status != 409:
                raise
            return None

    second = side.until("the name free", created)
    assert second["metadata"]["uid"] != first["metadata"]["uid"] and not second["spec"].get("suspend")
    new = side.until("the new Job's pod", lambda: next((p for p in side.pods(name) if p["metadata"]["labels"].get(
        runtime.CONTROLLER_UID) == second["metadata"]["uid"] and runtime.exit_of(p) is None), None))
    assert new["metadata"]["name"] != old["metadata"]["name"]
    side.until("the old pod gone", lambda: all(p["metadata"]["name"] != old["metadata"]["name"] for p in side.pods(name)) or None)


def test_foreground_deletion_keeps_the_job_until_its_pods_are_gone(side: Side) -> None:
    name = side.unique("foreground")
    side.run(name, Program(on_sigterm=OnSigterm(seconds=3, code=143)))
    running(side, name)
    side.api.delete(Kind.JOB, name, side.namespace, propagation="Foreground")
    job_ = side.the_job(name)
    assert job_ is not None and job_["metadata"].get("deletionTimestamp"), job_
    assert "foregroundDeletion" in job_["metadata"].get("finalizers", [])
    side.until("the pod being deleted", lambda: all(p["metadata"].get("deletionTimestamp") for p in side.pods(name)) or None)
    side.until("the Job gone", lambda: side.the_job(name) is None or None)
    assert side.pods(name) == []
    status, _ = api_error(lambda: side.api.delete(Kind.JOB, name, side.namespace))
    assert status == 404


def test_background_deletion_collects_what_the_deleted_object_owned(side: Side) -> None:
    """How a run's TensorBoard goes with the run: the objects its ConfigMap owns are collected after it."""
    name = side.unique("owner")
    owner = side.create(Kind.CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {LABEL: name}}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": owner["metadata"]["uid"]}
    side.create(Kind.SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": f"{name}-board", "labels": {LABEL: name}, "ownerReferences": [reference]},
        "spec": {"clusterIP": "None", "selector": {LABEL: name}, "ports": [{"port": PORT}]}})
    side.api.delete(Kind.CONFIG_MAP, name, side.namespace, propagation="Background")
    services = lambda: side.api.select(Kind.SERVICE, side.namespace, f"{LABEL}={name}")  # noqa: E731
    side.until("the owned Service collected", lambda: not services() or None)


def test_orphan_deletion_keeps_the_dependents_without_their_reference_to_the_owner(side: Side) -> None:
    name = side.unique("orphan")
    owner = side.create(Kind.CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {LABEL: name}}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": owner["metadata"]["uid"]}
    side.create(Kind.CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": f"{name}-owned", "labels": {LABEL: name}, "ownerReferences": [reference]}})
    side.api.delete(Kind.CONFIG_MAP, name, side.namespace, propagation="Orphan")

    def orphaned() -> list[Obj] | None:
        """What is left of the two once the owner is gone and its dependent no longer refers to it."""
        left = side.api.select(Kind.CONFIG_MAP, side.namespace, f"{LABEL}={name}")
        return left if [m["metadata"]["name"] for m in left] == [f"{name}-owned"] and not left[0]["metadata"].get("ownerReferences") else None

    side.until("the owner gone, its dependent kept without the reference", orphaned)


def test_a_deployment_gets_a_ready_pod_that_goes_with_it(side: Side) -> None:
    """What ``tensorboard`` waits for (``board._ready_pod``): the Deployment's ``readyReplicas``, then a Ready pod of its labels."""
    name = side.unique("board")
    side.deploy(name)
    ready = lambda: (side.api.read(Kind.DEPLOYMENT, name, side.namespace).get("status") or {}).get("readyReplicas")  # noqa: E731
    side.until("a ready replica", ready)
    pods = side.api.select(Kind.POD, side.namespace, f"{LABEL}={name}")
    assert [condition(p, "Ready") is not None for p in pods] == [True]
    side.api.delete(Kind.DEPLOYMENT, name, side.namespace, propagation="Background")
    side.until("its pod gone", lambda: not side.api.select(Kind.POD, side.namespace, f"{LABEL}={name}") or None)


# --- the kubelet, the scheduler, the admission -------------------------------------------------------------------


@pytest.mark.parametrize(("grace", "on_sigterm", "code"), [
    (0, SAVES_AND_EXITS, 143), (0, OnSigterm(seconds=0.5, code=7), 7), (2, IGNORES_SIGTERM, SIGKILL_EXIT),
], ids=["grace-0-is-sigterm-not-sigkill", "grace-0-still-gets-the-kubelets-2s", "sigterm-ignored-killed-after-the-grace"])
def test_a_deleted_pods_exit_code_is_its_answer_to_sigterm_or_137_after_the_grace(
        side: Side, grace: int, on_sigterm: OnSigterm, code: int) -> None:
    """What ``KubernetesRuntime.stop`` and the restart rules read of a deleted pod: SIGTERM first, even for a grace-0
    deletion (the process dies of it: 143 under tini, no SIGKILL), and SIGKILL (137) only once the grace ran out,
    never less than the kubelet's 2 s (``KUBELET_MINIMUM_GRACE_SECONDS``: a 0.5 s save ends with its own code).
    The exit code, seen through the Job (the pod goes once counted): a ``podFailurePolicy`` rule ignoring exactly
    ``code`` replaces the pod; any other code fails the Job (``backoffLimit: 0``)."""
    name = side.unique(f"exit{code}")
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [code]}}]}
    side.run(name, Program(on_sigterm=on_sigterm), podFailurePolicy=policy)
    pod = running(side, name)["metadata"]["name"]
    side.api.delete(Kind.POD, pod, side.namespace, grace_seconds=grace)
    assert side.until(f"the pod's exit {code} ignored, or the Job failed", lambda: replaced_or_failed(side, name, pod)) == "replaced"


def test_a_deleted_pod_on_a_lost_node_stays_terminating_past_its_grace(side: Side) -> None:
    """What ``KubernetesRuntime.stop`` meets on a lost node (the fake's ``unreachable``): the API server marks the
    deleted pod and waits for its node's kubelet to confirm the end, which never comes; nothing ends it (the runtime
    gives up after the grace and says so). The node: a Node object no kubelet serves, the pod bound to it."""
    name = side.unique("lost")
    side.run(name, Program(), {"nodeName": side.lost_node()})
    pod = side.until("its pod, bound to the node", lambda: next(iter(side.pods(name)), None))["metadata"]["name"]
    assert side.api.delete(Kind.POD, pod, side.namespace, grace_seconds=1)["metadata"].get("deletionTimestamp")
    past = side.now() + 10  # its grace, the kubelet's least grace, and more
    side.until("its grace long past", lambda: side.now() > past or None)
    [still] = side.pods(name)
    assert (still["metadata"]["name"], runtime.exit_of(still)) == (pod, None) and still["metadata"].get("deletionTimestamp")


def test_a_container_over_its_memory_limit_is_oom_killed(side: Side) -> None:
    """What ``KubernetesRuntime.oom_killed`` reads: exit 137 and the reason ``OOMKilled``."""
    name = side.unique("oom")
    side.run(name, Program(oom=True))
    ended(side, name, "Failed")
    [pod] = side.pods(name)
    assert (terminated(pod)["exitCode"], terminated(pod)["reason"]) == (SIGKILL_EXIT, "OOMKilled"), terminated(pod)


def test_a_pod_no_node_has_room_for_waits_unscheduled_and_says_why(side: Side) -> None:
    """What ``status`` says of a task that waits (``PodView.message``): the scheduler's ``PodScheduled`` condition."""
    name = side.unique("unschedulable")
    side.run(name, Program(), container={"resources": {"requests": {"cpu": "100"}}})
    pod = side.until("the scheduler's answer", lambda: next((p for p in side.pods(name) if PodView(p).unscheduled()), None))
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    assert re.fullmatch(r"Unschedulable: 0/\d+ nodes are available: .*\bInsufficient cpu\b.*", PodView(pod).message()), pod["status"]


def test_a_pod_whose_image_cannot_be_pulled_waits_in_the_pull_back_off(side: Side) -> None:
    """What ``status`` says of a task, and ``supervisor_state`` of a supervisor, whose image will not come."""
    name = side.unique("nopull")
    side.run(name, Program(), container={"image": MISSING_IMAGE})

    def backing_off() -> Obj | None:
        return next((p for p in side.pods(name) if "ImagePullBackOff" in PodView(p).message()), None)

    pod = side.until("the pull back-off", backing_off)
    assert pod["status"]["phase"] == "Pending"
    assert PodView(pod).message().startswith(f'ImagePullBackOff Back-off pulling image "{MISSING_IMAGE}"'), PodView(pod).message()


def test_a_job_naming_a_missing_service_account_gets_no_pod_until_the_account_exists(side: Side) -> None:
    """The ServiceAccount admission refuses a pod naming an account that does not exist (403, to the Job
    controller: the Job itself is created and started, without a pod); once the account exists the controller's
    next try creates it."""
    name = side.unique("account")
    side.run(name, Program(), {"serviceAccountName": name})
    side.until("the Job started", lambda: (side.the_job(name) or {}).get("status", {}).get("startTime"))
    assert side.pods(name) == []
    side.create(Kind.SERVICE_ACCOUNT, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "labels": {LABEL: name}}})
    assert running(side, name)["spec"]["serviceAccountName"] == name


# --- logs, exec, port-forward -------------------------------------------------------------------------------------


def test_logs_of_an_ended_pod_whole_tailed_and_followed(side: Side) -> None:
    name = side.unique("logs")
    side.run(name, Program(code=0, output="one\ntwo\nthree\n"))
    ended(side, name, "Complete")
    [pod] = side.pods(name)
    pod_name = pod["metadata"]["name"]
    assert list(pod_io.log_lines(side.api, pod_name, side.namespace, False)) == ["one", "two", "three"]
    assert list(pod_io.log_lines(side.api, pod_name, side.namespace, False, tail=2)) == ["two", "three"]
    assert list(pod_io.log_lines(side.api, pod_name, side.namespace, True)) == ["one", "two", "three"]  # ends: the pod has
    status, body = api_error(lambda: side.api.open_log(side.unique("missing"), side.namespace, CONTAINER, follow=False))
    assert (status, body["reason"]) == (404, "NotFound")
    refused = pod_io.exec_in_task(side.api, pod_name, side.namespace, ["true"])  # nothing runs in an ended pod
    assert isinstance(refused, str) and refused.startswith(f"exec in pod {pod_name} failed: "), refused


def test_following_the_logs_of_a_running_pod_ends_when_it_ends(side: Side) -> None:
    name = side.unique("follow")
    side.run(name, Program(output="first\n"))
    placed = running(side, name)
    assert "PodScheduled" in true_conditions(placed)  # bound: ``KubernetesRuntime.placing`` is over
    pod = placed["metadata"]["name"]
    side.until("the first line written", lambda: "first" in pod_io.log_lines(side.api, pod, side.namespace, False))
    lines = pod_io.log_lines(side.api, pod, side.namespace, True)
    assert next(lines) == "first"
    side.api.delete(Kind.POD, pod, side.namespace)  # SIGTERM: the process dies of it, the stream ends
    assert list(lines) == []


def test_exec_in_a_running_pod_gives_output_and_exit_code(side: Side) -> None:
    name = side.unique("exec")
    side.run(name, Program())
    seen = running(side, name)
    ipaddress.ip_address(seen["status"]["podIP"])  # a running pod has its address (the agent's endpoint is there)
    pod = seen["metadata"]["name"]
    ran = pod_io.exec_in_task(side.api, pod, side.namespace, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert ran == Ran(3, "out\n", "err\n"), ran
    assert pod_io.exec_in_task(side.api, pod, side.namespace, ["sh", "-c", "echo fine"]) == Ran(0, "fine\n", "")


def test_a_port_forward_reaches_the_pods_port(side: Side) -> None:
    name = side.unique("forward")
    side.run(name, Program(serves=True))
    pod = running(side, name)["metadata"]["name"]

    def echoed() -> bytes | None:
        """What comes back through a new port-forward; None when nothing listens yet (the forward is closed)."""
        forward = side.api.open_forward(pod, side.namespace, PORT)
        try:
            remote = forward.socket(PORT)
            remote.settimeout(30)
            remote.sendall(b"ping\n")
            return remote.recv(100) or None
        except OSError:
            return None
        finally:
            forward.close()

    assert side.until("an echo through the port-forward", echoed) == b"ping\n"


def test_a_port_forward_to_a_closed_port_ends_with_no_bytes_and_says_why(side: Side) -> None:
    name = side.unique("closed")
    side.run(name, Program())  # runs, listens nowhere
    pod = running(side, name)["metadata"]["name"]
    forward = side.api.open_forward(pod, side.namespace, PORT)
    try:
        remote = forward.socket(PORT)
        remote.settimeout(60)
        try:
            remote.sendall(b"ping\n")
        except OSError:
            pass  # already closed
        try:
            received = remote.recv(100)
        except ConnectionResetError:  # the real client's socket pair: reset when the stream ended on an error
            received = b""
        assert received == b""
        error = side.until("the port-forward's error", lambda: forward.error(PORT))
        assert f"error forwarding port {PORT}" in error and "connection refused" in error, error
    finally:
        forward.close()


# --- PodGroups (kubernetes.gang) -----------------------------------------------------------------------------------


def test_pod_groups_are_discovered_kept_listed_by_label_and_deleted_and_a_jobs_pod_keeps_its_group(side: Side) -> None:
    """What the backend reads of PodGroups (``gang``): API discovery lists them, a second create is 409, a Job's pod
    keeps its template's ``schedulingGroup`` (the API server drops it only where PodGroups are not served), and a
    deleted group goes once its pods have ended (the real side's ``podgroup-protection`` finalizer)."""
    assert side.api.serves_pod_groups()
    name = side.unique("gang")
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "labels": {LABEL: name}},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}
    made = side.create(Kind.POD_GROUP, group)
    assert made["spec"]["schedulingPolicy"] == {"gang": {"minCount": 1}}
    status, body = api_error(lambda: side.api.create(Kind.POD_GROUP, side.namespace, group))
    assert (status, body["reason"]) == (409, "AlreadyExists")
    assert [g["metadata"]["name"] for g in side.api.select(Kind.POD_GROUP, side.namespace, f"{LABEL}={name}")] == [name]
    member = side.unique("member")
    side.run(member, Program(code=0), pod={"schedulingGroup": {"podGroupName": name}})
    ended(side, member, "Complete")
    assert side.pods(member)[-1]["spec"]["schedulingGroup"] == {"podGroupName": name}
    side.api.delete(Kind.POD_GROUP, name, side.namespace)
    side.until("the PodGroup gone", lambda: side.api.read_if_exists(Kind.POD_GROUP, name, side.namespace) is None)


# --- watch (the supervisor's cache: ``watched``) ------------------------------------------------------------------

#: How long (real time) a watch may take to send what happened before it opened.
WATCH_WAIT_SECONDS = 60.0


def watch_events(side: Side, kind: Kind, name: str, version: str, until: Callable[[list[Obj]], T | None]) -> T:
    """The events of a watch of ``name``'s objects (``LABEL``) from ``version``, read in a thread (for up to
    ``WATCH_WAIT_SECONDS``), until ``until`` finds what it looks for in them: changes made before the watch opened,
    which it sends at once."""
    seen: list[Obj] = []
    stream = side.api.watch(kind, side.namespace, f"{LABEL}={name}", version, 120, lambda: None)
    thread = threading.Thread(target=lambda: seen.extend(stream.events()), daemon=True)
    thread.start()
    try:
        found: list[T] = []
        wait_for_condition(lambda: found.append(value) or True if (value := until(list(seen))) else False,
                           WATCH_WAIT_SECONDS)
        return found[0]
    finally:
        stream.stop()
        thread.join(timeout=10)


def test_a_watch_from_a_lists_version_sends_each_later_change_with_its_version(side: Side) -> None:
    """``Watched``: a LIST gives the version the objects are at; a WATCH from it sends each change after it (the Job
    created, then resumed), each object carrying its newer ``resourceVersion``."""
    name = side.unique("watched")
    items, version = side.api.listing(Kind.JOB, side.namespace, f"{LABEL}={name}")
    assert items == [] and version
    side.run(name, Program(), suspend=True)
    side.api.merge_patch(Kind.JOB, name, side.namespace, {"spec": {"suspend": False}})

    def resumed(events: list[Obj]) -> list[Obj] | None:
        jobs = [e for e in events if e["type"] in ("ADDED", "MODIFIED")]
        return jobs if any(e["object"]["spec"].get("suspend") is False for e in jobs) else None

    events = watch_events(side, Kind.JOB, name, version, resumed)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == name
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(version)


def test_a_watch_from_a_version_the_server_no_longer_keeps_is_410_expired(side: Side) -> None:
    """What makes ``Watched`` list again: a version older than the API server's watch cache keeps (etcd compacted
    it; the fake forgets its history, ``compact``) is an ERROR event, 410 ``Expired``, "too old resource version",
    which the client raises. On the real cluster "1" is long gone, but a busy API server once accepted a watch from it
    (an empty watch, no error: 18 minutes after the cluster started, beside a second test process, its watch caches
    lagging behind etcd, as its log's "Too large resource version" lines said; the cause is not proven) and answered
    410 when asked again later: the watch is asked until it answers 410, within the side's bound."""
    from kubernetes.client.exceptions import ApiException

    for _ in range(2):  # version 1 is then older than the latest, on the fake too
        side.run(side.unique("old"), Program(), suspend=True)
    if isinstance(side, FakeSide):
        side.fake.compact()

    def expired() -> ApiException | None:
        stream = side.api.watch(Kind.POD, side.namespace, f"{LABEL}=none", "1", 5, lambda: None)
        try:
            list(stream.events())
        except ApiException as exc:
            return exc
        return None

    caught = side.until("a watch from version 1 answered 410", expired)
    assert caught.status == 410 and caught.reason.startswith("Expired: too old resource version: 1 ("), caught


def test_a_list_by_phase_answers_the_waiting_pods_whole_and_a_metadata_list_the_objects_metadata_alone(side: Side) -> None:
    """What ``status`` reads (``KubernetesBackend.describe``): a pods' ``status.phase=Pending`` field selector
    answers only the pods that wait, whole; a metadata list (``kubeapi.METADATA_ONLY``) each pod's and Job's metadata
    (name, uid, labels with the Job's uid, creation time) without spec or status, and nothing as no item; a field the
    API does not select pods by is 400."""
    waits, runs = side.unique("waits"), side.unique("runs")
    side.run(waits, Program(), container={"resources": {"requests": {"cpu": "100"}}})
    runs_job = side.run(runs, Program())
    running(side, runs)
    side.until("the waiting pod", lambda: next((p for p in side.pods(waits) if PodView(p).unscheduled()), None))

    def select(name: str, kind: Kind = Kind.POD, **how: Any) -> list[Obj]:
        return side.api.select(kind, side.namespace, f"{LABEL}={name}", **how)

    [waiting] = select(waits, fields="status.phase=Pending")
    assert waiting["status"]["phase"] == "Pending" and waiting["spec"]["containers"]
    assert select(runs, fields="status.phase=Pending") == []
    [pod] = select(runs, metadata_only=True)
    [job_meta] = select(runs, Kind.JOB, metadata_only=True)
    assert set(pod) == set(job_meta) == {"kind", "apiVersion", "metadata"}, (pod, job_meta)
    assert pod["kind"] == "PartialObjectMetadata" and pod["apiVersion"] == "meta.k8s.io/v1"
    assert job_meta["metadata"]["uid"] == runs_job["metadata"]["uid"]
    assert pod["metadata"]["labels"][CONTROLLER_UID] == runs_job["metadata"]["uid"]
    assert pod["metadata"]["creationTimestamp"] and pod["metadata"]["name"] == side.pods(runs)[0]["metadata"]["name"]
    assert select(side.unique("none"), metadata_only=True) == []
    assert api_error(lambda: select(runs, fields="spec.nothing=x"))[0] == 400


def test_a_list_in_pages_answers_each_object_once_at_one_version(side: Side, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KubeApi.listing`` (``Watched``'s LIST) reads ``LIST_PAGE`` objects at a time: a ``limit`` answers that many
    and a ``continue`` token, the token the rest of the same list (its version), the last page none; a token the
    server cannot read is 400."""
    name = side.unique("paged")
    for index in range(3):
        side.create(Kind.CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": f"{name}-{index}", "labels": {LABEL: name}}})
    first = json.loads(side.api._list(Kind.CONFIG_MAP, side.namespace, label_selector=f"{LABEL}={name}", limit=2).data)
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    monkeypatch.setattr(kubeapi, "LIST_PAGE", 2)
    items, version = side.api.listing(Kind.CONFIG_MAP, side.namespace, f"{LABEL}={name}")
    assert sorted(item["metadata"]["name"] for item in items) == [f"{name}-{index}" for index in range(3)]
    assert int(version) >= int(first["metadata"]["resourceVersion"])
    status, _ = api_error(lambda: side.api._list(Kind.CONFIG_MAP, side.namespace, label_selector=f"{LABEL}={name}",
                                                 limit=2, continue_token="bm90LWEtdG9rZW4"))
    assert status == 400, status
