"""``tfcluster tensorboard`` on Kubernetes: apply a board's objects, forward a local port to its pod, remove them.

Contract: ``tensorboard`` applies the run's TensorBoard objects that the rendered ConfigMap holds, once
``tensorboard.checked_board`` found them to be the board its plan makes (anything else is refused, nothing
created), or for
several runs one board mounting each run's claim (``tensorboard.shared_board``), owned by every shown run's
ConfigMap (so ``down`` of any of them and the garbage collector, once all are gone, remove it), waits for a
ready pod, forwards ``host:port`` to it through the API server (``pods/<pod>/portforward``) and deletes it
when left. When every log dir is a bucket, TensorBoard runs here instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.cluster_state import planned_again
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.portforward import PortForwarder
from launcher.backends.kubernetes.tensorboard import BoardRun, checked_board, shared_board
from launcher.backends.tensorboard import PORT, Board, log_dir_of, serve_locally, url, wait_until_serving
from launcher.errors import LaunchError
from launcher.protocol.checkpoint_layout import is_object_store

#: How long the TensorBoard Deployment may take to have a ready pod (image pull, scheduling).
BOARD_READY_SECONDS = 300.0


def tensorboard(api: KubeApi, names: Sequence[str], namespace: str, host: str, port: int,
                pause: Callable[[float], None] = time.sleep) -> AbstractContextManager[Board]:
    """A TensorBoard Deployment reached through a port-forward; TensorBoard here when every log dir is a bucket.

    One run: the objects its ConfigMap stores (``checked_board``). Several (a name given
    twice counts once): one ``tensorboard.shared_board`` of the runs in
    name order (the same board whatever order they are given in), owned
    by every run's ConfigMap. ``LaunchError`` for a run not in
    ``namespace`` or without summaries. ``pause`` waits between looks for its ready pod.
    """
    runs = sorted(set(names))
    configs = {name: apply.config_map(api, name, namespace) for name in runs}
    plans = {name: planned_again(name, c) for name, c in configs.items()}
    dirs = {name: log_dir_of(name, plan.run_config.tensorboard_dir) for name, plan in plans.items()}
    if all(is_object_store(d) for d in dirs.values()):
        return serve_locally(dirs, host, port)
    owners = [apply.owner(c) for c in configs.values()]
    first = checked_board(plans[runs[0]], configs[runs[0]]["data"])
    if len(runs) == 1:
        return _board(api, first, owners, namespace, host, port, pause)
    board = shared_board([BoardRun.of(plan) for plan in plans.values()], first)
    return _board(api, board, owners, namespace, host, port, pause)


@contextmanager
def _board(api: KubeApi, board: list[Obj], owners: list[dict[str, Any]], namespace: str, host: str,
           port: int, pause: Callable[[float], None]) -> Iterator[Board]:
    """Apply a TensorBoard's objects (Deployment first) owned by ``owners``, forward to its ready pod, delete them after."""
    applied: list[Obj] = []
    try:
        for obj in board:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace, "ownerReferences": owners}}
            apply.apply(api, obj, namespace)
            applied.append(obj)
        deployment = applied[0]
        pod = _ready_pod(api, deployment["metadata"]["name"], deployment["spec"]["selector"]["matchLabels"], namespace,
                         pause)
        with PortForwarder(partial(api.open_forward, pod, namespace, PORT), PORT, host, port) as forward:
            address = url(host, port)
            wait_until_serving(address, forward.running, lambda: f"pod {pod} does not answer on port {PORT}")
            yield Board(address, forward.running)
    finally:
        for obj in reversed(applied):
            apply.delete(api, Kind(obj["kind"]), obj["metadata"]["name"], namespace)


def _ready_pod(api: KubeApi, deployment: str, labels: dict[str, str], namespace: str,
               pause: Callable[[float], None]) -> str:
    """The name of a ready pod (one with ``labels``) of the TensorBoard Deployment, once it has one."""
    ends = time.monotonic() + BOARD_READY_SECONDS
    selector = ",".join(f"{key}={value}" for key, value in labels.items())
    waiting = "no pod yet"
    while time.monotonic() < ends:
        with api.errors(f"read TensorBoard {deployment}"):
            ready = (api.read(Kind.DEPLOYMENT, deployment, namespace).get("status") or {}).get("readyReplicas")
            pods = api.select(Kind.POD, namespace, selector)
        for pod in pods if ready else []:
            conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
            if conditions.get("Ready") == "True" and not pod["metadata"].get("deletionTimestamp"):
                return str(pod["metadata"]["name"])
        waiting = k8s_status.waiting_reason(pods)
        pause(1.0)
    raise LaunchError(f"TensorBoard Deployment {deployment} had no ready pod after {BOARD_READY_SECONDS:.0f}s: {waiting}")
