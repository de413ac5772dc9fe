"""The in-cluster supervisor of a Kubernetes run: what ``KubernetesBackend.rounds`` gives the harness.

Contract: run in the pod of the run's supervisor Job (``supervisor_objects``) by ``python -m
launcher.backends.supervisor_process --rounds k8s NAME`` (``harness.serve_rounds``), with its ServiceAccount's
token and ``TFCLUSTER_NAMESPACE``/``TFCLUSTER_POD`` from the downward API. Each round is the round the
launcher's watch makes (``runtime.Supervision.round``); all it keeps between rounds lives in the API (the
run's Jobs, pods and ConfigMap), so a replacement adopts the run as it finds it. The run is ``over`` once it
has ended and none of its training Jobs still runs, or once it is gone (``down``). A stall's stacks go to the
pod's log and to the run's ConfigMap (``STACKS_KEY``: the latest stall's, at most ``STACKS_BYTES``, each task's
cut to its share), which the supervisor's Role may update and ``down`` deletes: they outlive the pod.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.manifests import CONFIG_MAP_LIMIT
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.supervision.stack_dumps import bounded_text

#: The environment the supervisor Job gives its pod (the downward API).
NAMESPACE_ENV, POD_ENV = "TFCLUSTER_NAMESPACE", "TFCLUSTER_POD"
#: The run's ConfigMap key holding the latest stall's stacks (a plain text: kubectl prints it as it is).
STACKS_KEY = "stacks"
#: At most this many bytes of stacks in the ConfigMap (which holds 1 MiB in all, the run's description first).
STACKS_BYTES = 256 * 1024
#: Room left in the ConfigMap for its metadata and the supervisor's records (the stall, the failure rules).
RECORDS_BYTES = 16 * 1024


def keep_stacks(api: KubeApi, namespace: str, say: Callable[[str], None], name: str, number: int,
                dumps: dict[str, str | None]) -> str | None:
    """A stall's stacks, into this pod's log (``say``: the harness's) and, bounded, into the run's ConfigMap under
    ``STACKS_KEY`` (the previous stall's replaced); returns where to read them (a kubectl line)."""
    for task, dump in dumps.items():
        say(f"stacks of {task} at stall {number}:\n{dump or '(none: the task gave no dump)'}")
    pod = os.environ.get(POD_ENV, naming.supervisor_name(name))
    in_log = f"the log of pod {pod} (kubectl logs {pod})"
    try:
        config_map = apply.config_map(api, name, namespace)
        others = sum(len(k.encode()) + len(v.encode()) for k, v in config_map.get("data", {}).items() if k != STACKS_KEY)
        room = min(STACKS_BYTES, CONFIG_MAP_LIMIT - RECORDS_BYTES - others)
        if room <= 0:
            return in_log  # the run's description leaves no room: the log only
        apply.write_data(api, config_map, STACKS_KEY, bounded_text(number, dumps, room), namespace)
    except LaunchError as exc:
        say(f"tfcluster: the stacks of stall {number} are in this log only: {exc}")
        return in_log
    cm = config_map["metadata"]["name"]
    return (f"ConfigMap {cm} key {STACKS_KEY} (kubectl get configmap {cm} -n {namespace} "
            f"-o jsonpath='{{.data.{STACKS_KEY}}}'; at most {room // 1024} KiB, each task's cut to its share) "
            f"and {in_log}")


def over(api: KubeApi, name: str, namespace: str, listed: tuple[list[Obj], list[Obj]] | None) -> bool:
    """The run ended and none of its training Jobs runs, or it is gone (its ConfigMap deleted by ``down``), by
    ``listed``: the Jobs and pods of the round just made (``Supervision.listed``), or listed now without them."""
    if listed is None:
        listed = apply.of_cluster(api, Kind.JOB, namespace, name), apply.of_cluster(api, Kind.POD, namespace, name)
    jobs, pods = listed
    status = k8s_status.job_status(name, jobs, pods)
    if status is None:
        with api.errors(f"read ConfigMap {naming.config_map_name(name)}"):
            return api.read_if_exists(Kind.CONFIG_MAP, naming.config_map_name(name), namespace) is None
    running = [job for job in jobs if not (k8s_status.job_complete(job) or k8s_status.job_failed(job))]
    return status.state.terminal and not running
