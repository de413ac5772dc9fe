"""What the tests on a real Kubernetes cluster share (tests/e2e/, tests/contract/'s real side).

Contract: the cluster is the kubeconfig at ``TFCLUSTER_E2E_KUBECONFIG`` (``helpers.k8s_start`` sets it for a started
cluster); ``namespace()`` is the one home of the namespace the tests use: ``TFCLUSTER_E2E_NAMESPACE`` when set, else
the namespace of that kubeconfig's current context (``.ci/k8s.sh`` writes ``tfcluster-e2e`` there), else "default".
Read at test time, never at collection (the background start's kubeconfig is known only then).
``demo_plan`` is a small real training run; ``supervise_until`` is ``tfcluster up``'s loop without the live view.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan.planner import Plan
from launcher.supervision.status import JobStatus

KUBECONFIG_ENV = "TFCLUSTER_E2E_KUBECONFIG"
NAMESPACE_ENV = "TFCLUSTER_E2E_NAMESPACE"
#: The longest a real run of these tests may take.
TIMEOUT_SECONDS = 20 * 60


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


def demo_plan(name: str, workers: int = 2) -> Plan:
    """A chief and ``workers`` workers training 2 short epochs, restarted on an exit code, on a claim of their own."""
    claim = {"size": "1Gi"}
    if os.environ.get("TFCLUSTER_E2E_STORAGE_CLASS"):
        claim["storage_class"] = os.environ["TFCLUSTER_E2E_STORAGE_CLASS"]
    spec = validate_data(
        {
            "name": name,
            "image": image(),
            "roles": {"chief": {}, "worker": {"replicas": workers}},
            "training": {"epochs": 2, "steps_per_epoch": 30, "batch_size_per_replica": 16},
            "checkpoint": {"backup_every_steps": 5},
            "restart": {"policy": "exit-code", "max_restarts": 3},
            "deadline_seconds": TIMEOUT_SECONDS,
            "kubernetes": {"namespace": namespace(), "volume_claim": claim},
        }
    )
    return api.plan(spec, "k8s", api.new_run_id())


def supervise_until(backend: KubernetesBackend, name: str, done: Callable[[JobStatus], bool],
                    timeout: float = TIMEOUT_SECONDS) -> JobStatus:
    """The `up` loop without the live view: supervise, describe, until ``done(status)`` (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        backend.watch_round(name)
        status = backend.describe(name)
        assert status is not None
        if done(status):
            return status
        time.sleep(2)
    pytest.fail(f"timed out; last status: {status}")
