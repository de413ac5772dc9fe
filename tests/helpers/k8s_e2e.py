"""What the tests on a real Kubernetes cluster share (tests/e2e/, tests/contract/'s real side).

Contract: the cluster is the kubeconfig at ``TFCLUSTER_E2E_KUBECONFIG`` (``helpers.k8s_start`` sets it for a started
cluster); ``namespace()`` is the one home of the namespace the tests use: ``TFCLUSTER_E2E_NAMESPACE`` when set, else
the namespace of that kubeconfig's current context (``.ci/k8s.sh`` writes ``tfcluster-e2e`` there), else "default".
Read at test time, never at collection (the background start's kubeconfig is known only then).
``run_name(base)`` is the one home of the runs' names: ``base`` and a random suffix made once per session, so that
two sessions in one namespace (CI and a developer, two developers) never take down each other's runs.
``demo_plan`` is a small real training run; ``supervise_until`` is ``tfcluster up``'s loop without the live view;
``kill_9_task`` kills a task's process as a crash would; ``left_of`` lists what a run left in the namespace.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from typing import Any

import pytest

from helpers import k8s_start
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.supervision.status import JobStatus

KUBECONFIG_ENV = "TFCLUSTER_E2E_KUBECONFIG"
NAMESPACE_ENV = "TFCLUSTER_E2E_NAMESPACE"
#: The longest a real run of these tests may take.
TIMEOUT_SECONDS = 20 * 60
#: Made once per session (process): every run name of this session ends with it.
SESSION_SUFFIX = secrets.token_hex(3)
#: Run in a task's container (pods/exec): SIGKILL to each child of PID 1 (the image's tini), i.e. the task's process.
KILL_9_TASK = """
import os, signal
children = [int(p) for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().rpartition(")")[2].split()[1] == "1"]
for pid in children:
    os.kill(pid, signal.SIGKILL)
print("killed" if children else "no child of PID 1")
"""


def run_name(base: str) -> str:
    """``base`` made unique to this session (``<base>-<SESSION_SUFFIX>``): the name of a run the tests create."""
    return f"{base}-{SESSION_SUFFIX}"


def kubeconfig() -> str:
    """The real cluster's kubeconfig path (the e2e fixture made sure it is set)."""
    return os.environ[KUBECONFIG_ENV]


def namespace() -> str:
    """The namespace every object of the real-cluster tests goes to (see the module's contract)."""
    if os.environ.get(NAMESPACE_ENV):
        return os.environ[NAMESPACE_ENV]
    path = os.environ.get(KUBECONFIG_ENV)
    if path:
        from kubernetes import config

        _, active = config.list_kube_config_contexts(config_file=path)
        if active and active.get("context", {}).get("namespace"):
            return str(active["context"]["namespace"])
    return "default"


def image() -> str:
    """The worker image the cluster pulls (``TFCLUSTER_E2E_IMAGE``; default tfcluster-worker:latest)."""
    return os.environ.get("TFCLUSTER_E2E_IMAGE", "tfcluster-worker:latest")


def demo_plan(name: str, workers: int = 2, epochs: int = 2) -> Plan:
    """A chief and ``workers`` workers training ``epochs`` short epochs, restarted on an exit code, on a claim of
    their own."""
    claim = {"size": "1Gi"}
    if os.environ.get("TFCLUSTER_E2E_STORAGE_CLASS"):
        claim["storage_class"] = os.environ["TFCLUSTER_E2E_STORAGE_CLASS"]
    spec = validate_data(
        {
            "name": name,
            "image": image(),
            "roles": {"chief": {}, "worker": {"replicas": workers}},
            "training": {"epochs": epochs, "steps_per_epoch": 30, "batch_size_per_replica": 16},
            "checkpoint": {"backup_every_steps": 5},
            "restart": {"policy": "exit-code", "max_restarts": 3},
            "deadline_seconds": TIMEOUT_SECONDS,
            "kubernetes": {"namespace": namespace(), "volume_claim": claim},
        }
    )
    return api.plan(spec, "k8s", api.new_run_id())


def supervise_until(backend: KubernetesBackend, name: str, done: Callable[[JobStatus], bool],
                    timeout: float = TIMEOUT_SECONDS, watch: bool = True) -> JobStatus:
    """The `up` loop without the live view: supervise (``watch``: a round of the launcher's watch, which stands
    aside while the run's in-cluster supervisor runs; False: no launcher watching at all), describe, until
    ``done(status)`` (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        if watch:
            backend.watch_round(name)
        status = backend.describe(name)
        assert status is not None
        if done(status):
            return status
        time.sleep(2)
    pytest.fail(f"timed out; last status: {status}")


def kill_9_task(core: Any, pod: str) -> tuple[int | None, str, str]:
    """``kill -9`` of the task's process in ``pod`` through ``pods/exec`` (``KILL_9_TASK``; a crash, not a pod
    deletion, which a real kubelet turns into SIGTERM and a grace): the exec's exit status, stdout and stderr.

    PID 1 is the image's tini, which no signal from inside its namespace kills: the task is its child, and tini then
    exits 128 + 9. ``core``: a ``CoreV1Api`` of the cluster."""
    from kubernetes.stream import stream

    ran = stream(core.connect_get_namespaced_pod_exec, pod, namespace(), container=CONTAINER,
                 command=["python", "-c", KILL_9_TASK], stdin=False, stdout=True, stderr=True, tty=False,
                 _preload_content=False)
    ran.run_forever(timeout=60)
    return ran.returncode, ran.read_stdout(), ran.read_stderr()


def left_of(name: str, core: Any) -> list[str]:
    """Every object of the run's labels (``naming.LABEL_CLUSTER``) still in the namespace, as ``kind/name``."""
    from kubernetes import client

    apis = {"core": core, "batch": client.BatchV1Api(core.api_client), "net": client.NetworkingV1Api(core.api_client)}
    listed = [(kind, apis["core"], kind) for kind in ("pod", "service", "config_map", "service_account",
                                                      "persistent_volume_claim")]
    listed += [("job", apis["batch"], "job"), ("network_policy", apis["net"], "network_policy")]
    selector = f"{naming.LABEL_CLUSTER}={name}"
    return sorted(f"{kind}/{obj.metadata.name}" for kind, api_, method in listed
                  for obj in getattr(api_, f"list_namespaced_{method}")(namespace(), label_selector=selector).items)


#: The registry a developer's cluster's nodes pull from, as .ci/k8s.sh exports it (read here: tests/conftest.py hides it
#: from each test, so that no other test takes it as `--registry`'s default).
EXPORTED_REGISTRY = os.environ.get("TFCLUSTER_REGISTRY")


def registry() -> str | None:
    """The registry of the cluster scripts/test.sh started (known only once it started), else the exported one."""
    started = k8s_start.await_start()
    return started.exports.get("TFCLUSTER_REGISTRY") if started is not None else EXPORTED_REGISTRY
