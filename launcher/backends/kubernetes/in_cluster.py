"""The in-cluster supervisor of a Kubernetes run: what ``KubernetesBackend.rounds`` gives the harness.

Contract: run in the pod of the run's supervisor Job (``supervisor_objects``) by ``python -m
launcher.backends.supervisor_process --rounds k8s NAME`` (``harness.serve_rounds``), with its ServiceAccount's
token and ``TFCLUSTER_NAMESPACE``/``TFCLUSTER_POD`` from the downward API. Each round is the round the
launcher's watch makes (``runtime.Supervision.round``); all it keeps between rounds lives in the API (the
run's Jobs, pods and ConfigMap), so a replacement adopts the run as it finds it. The run is ``over`` once it
has ended and none of its training Jobs still runs, or once it is gone (``down``). A stall's stacks go to the
pod's log, kept with the pod.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi
from launcher.plan import naming

#: The environment the supervisor Job gives its pod (the downward API).
NAMESPACE_ENV, POD_ENV = "TFCLUSTER_NAMESPACE", "TFCLUSTER_POD"


def log_stacks(say: Callable[[str], None], name: str, number: int, dumps: dict[str, str | None]) -> str | None:
    """A stall's stacks, into this pod's log (``say``: the harness's); returns where to read them."""
    for task, dump in dumps.items():
        say(f"stacks of {task} at stall {number}:\n{dump or '(none: the task gave no dump)'}")
    pod = os.environ.get(POD_ENV, naming.supervisor_name(name))
    return f"the log of pod {pod} (kubectl logs {pod})"


def over(api: KubeApi, name: str, namespace: str) -> bool:
    """The run ended and none of its training Jobs runs, or it is gone (its ConfigMap deleted by ``down``)."""
    jobs = apply.of_cluster(api, Kind.JOB, namespace, name)
    status = k8s_status.job_status(name, jobs, apply.of_cluster(api, Kind.POD, namespace, name))
    if status is None:
        with api.errors(f"read ConfigMap {naming.config_map_name(name)}"):
            return api.read_if_exists(Kind.CONFIG_MAP, naming.config_map_name(name), namespace) is None
    running = [job for job in jobs if not (k8s_status.job_complete(job) or k8s_status.job_failed(job))]
    return status.state.terminal and not running
