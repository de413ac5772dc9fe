"""Runs on the test cluster's simulated nodes (``TFCLUSTER_K8S_SIM_NODES=N bash .ci/k8s.sh``: KWOK), for the scale
e2e test and ``bench/bench_k8s_scale.py``.

Contract: ``sim_spec(name, tasks)`` is a MultiWorkerMirrored run (a chief and ``tasks - 1`` workers) whose task pods
go only to the simulated nodes (``kubernetes.node_selector`` + ``tolerations``: ``NODE_SELECTOR``, ``TOLERATION``),
while its supervisor pod stays on the real node (no ``kubernetes.supervisor_placement``: the simulated nodes' taint
keeps it off them). Its pods never run a program (KWOK reports them Running at once, and for ever), so its
checkpoints are a URL (nothing to mount: the test cluster's local volumes are on the real node only), its stall
watchdog only warns, and its restarts are counted, at most ``MAX_RESTARTS``. ``sim_nodes(core)`` counts the Ready
simulated nodes; ``phases(core, name)`` counts the run's task pods by phase; ``admin()`` is the administrator's client
(reads nodes and the API server's metrics, which the launcher's Role does not grant).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from helpers import k8s_e2e
from launcher.plan import naming

#: What .ci/k8s.sh labels and taints each simulated node with.
NODE_SELECTOR = {"type": "kwok"}
TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}
#: The label and annotation of KWOK's `pod-container-running-failed` stage: a Running pod so labelled fails ~1 s
#: later with the annotation's exit code.
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
FAIL_EXIT_ANNOTATION = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code"
MAX_RESTARTS = 5
#: Each task's requests: 1,000 tasks fit 20 simulated nodes (32 CPU, 256 Gi, 110 pods each) with room to spare.
RESOURCES = {"cpu": 0.5, "memory": "1Gi"}


def sim_spec(name: str, tasks: int, deadline_seconds: int = 3600) -> dict[str, Any]:
    """A chief and ``tasks - 1`` workers on the simulated nodes (see the module's contract)."""
    return {
        "name": name,
        "image": k8s_e2e.image(),
        "strategy": "multi_worker_mirrored",
        "roles": {"chief": {"resources": RESOURCES}, "worker": {"replicas": tasks - 1, "resources": RESOURCES}},
        "checkpoint": {"dir": f"gs://tfcluster-sim-nothing-written/{name}"},
        "restart": {"policy": "on-failure", "max_restarts": MAX_RESTARTS},
        "stall": {"action": "warn", "timeout_seconds": 7 * 24 * 3600},
        "deadline_seconds": deadline_seconds,
        "kubernetes": {"namespace": k8s_e2e.namespace(), "node_selector": NODE_SELECTOR, "tolerations": [TOLERATION],
                       "ttl_seconds_after_finished": None},
    }


def admin() -> Any:
    """``CoreV1Api`` as the cluster's administrator."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=k8s_e2e.admin_kubeconfig()))


def sim_nodes(core: Any) -> int:
    """How many simulated nodes are Ready."""
    selector = ",".join(f"{k}={v}" for k, v in NODE_SELECTOR.items())
    return sum(1 for node in core.list_node(label_selector=selector).items
               if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []))


def task_pods(core: Any, name: str) -> list[Any]:
    """The run's task pods (not its supervisor's) in the tests' namespace."""
    return core.list_namespaced_pod(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}").items


def phases(core: Any, name: str) -> Counter[str]:
    """The run's task pods counted by phase (a pod being deleted counts as ``Terminating``)."""
    return Counter("Terminating" if pod.metadata.deletion_timestamp else (pod.status.phase or "Pending")
                   for pod in task_pods(core, name))
