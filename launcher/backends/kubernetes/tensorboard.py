"""The Kubernetes objects of a run's TensorBoard (as ``launcher.backends.compose.tensorboard`` for compose).

Contract: pure functions, no Kubernetes client import. ``tensorboard_objects(plan)``
is the run's board, stored at launch in its ConfigMap (``TENSORBOARD_KEY``)
and applied by ``tfcluster tensorboard``; ``checked_board`` reads it back and
gives it only when it is the board the run's plan (made again from the same
ConfigMap) makes: what anyone who may write that ConfigMap put there is never
applied with the user's credentials unless it is that board. ``BoardRun.of``
describes a launched run from its plan, and ``shared_board`` makes one board
of several launched runs. Every board is a Deployment, a ClusterIP Service
and a NetworkPolicy that admits no pod: ``tfcluster tensorboard`` reaches the
board by a port-forward, through the kubelet, which needs no pod ingress.
"""

from __future__ import annotations

import copy
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launcher.backends import tensorboard
from launcher.backends.kubernetes.pods import (
    CHECKPOINT_VOLUME,
    TENSORBOARD_KEY,
    TMP_DIR,
    TMP_VOLUME,
    Manifest,
    checkpoint_claim_name,
    container_security,
    hardened_pod,
    meta,
)
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.workspace import is_workspace_tag
from launcher.protocol.checkpoint_layout import is_object_store
from launcher.spec.image_reference import pull_policy
from launcher.spec.paths import is_within

TENSORBOARD_CONTAINER = "tensorboard"
#: Where a TensorBoard shared by several runs mounts each run's claim: ``<dir>/<run name>``.
BOARD_RUNS_DIR = "/runs"


def tensorboard_objects(plan: Plan, image: str | None = None) -> list[Manifest]:
    """The run's TensorBoard: a Deployment, its ClusterIP Service and a NetworkPolicy; none when TensorBoard is off.

    Stored in the run's ConfigMap (``TENSORBOARD_KEY``) and applied by
    ``tfcluster tensorboard`` with an owner reference to that ConfigMap, so
    they go with the run. The pod runs ``image`` (default ``plan.board_image()``)
    as the tasks run theirs (non-root, read-only root filesystem, no API token),
    mounts the checkpoint claim read-only and carries ``naming.tensorboard_labels``,
    not the run's task labels; the NetworkPolicy admits no pod.
    """
    log_dir = plan.run_config.tensorboard_dir
    if log_dir is None:
        return []
    claim = checkpoint_claim_name(plan)
    claims = [_BoardClaim(CHECKPOINT_VOLUME, claim, plan.run_config.checkpoint_dir)] if claim is not None else []
    return _board_objects(
        meta(plan, naming.tensorboard_name(plan.name)),
        naming.tensorboard_labels(plan.name),
        {"restartPolicy": "Always", **hardened_pod(plan, [], [])},
        image or plan.board_image(),
        {plan.name: log_dir},
        plan.spec.kubernetes.env_from_secrets,  # credentials for a gs:// or s3:// log dir
        claims,
    )


@dataclass(frozen=True)
class BoardRun:
    """One run shown on a shared TensorBoard (``shared_board``), as its plan describes it.

    ``log_dir`` and ``checkpoint_dir`` are the run's (``RunConfig``);
    ``claim`` is the claim its checkpoint dir is on (None for a URL
    checkpoint dir); ``secrets`` are the ``envFrom`` secrets of its own
    board (credentials for a bucket log dir).
    """

    name: str
    log_dir: str
    checkpoint_dir: str
    claim: str | None = None
    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, plan: Plan) -> BoardRun:
        """The launched run ``plan`` (made again from its ConfigMap); ``LaunchError`` if it writes no summaries."""
        run = plan.run_config
        return cls(plan.name, tensorboard.log_dir_of(plan.name, run.tensorboard_dir), run.checkpoint_dir,
                   checkpoint_claim_name(plan), tuple(plan.spec.kubernetes.env_from_secrets))


def checked_board(plan: Plan, data: Mapping[str, str]) -> list[Manifest]:
    """The TensorBoard objects run ``plan.name``'s ConfigMap ``data`` holds, if they are ``tensorboard_objects(plan)``.

    ``plan`` is the run planned again from the same ConfigMap
    (``cluster_state.planned_again``); only the image may differ from the
    plan's, and only to a tag of the run's workspace layer (its hash is of
    files the ConfigMap does not hold) when the spec has a workspace and no
    ``tensorboard.image``. Anything else (another kind, object, name, label,
    image, volume, account, a JSON that is no board) is a ``LaunchError`` of
    one line: whoever can write that ConfigMap (namespace editors, the
    supervisor's account) must not make ``tfcluster tensorboard`` create
    what they choose with the user's credentials.
    """
    config_map = naming.config_map_name(plan.name)
    if TENSORBOARD_KEY not in data:
        raise LaunchError(f"ConfigMap {config_map} holds no TensorBoard objects (launched by an older "
                          "tfcluster?): launch the run again, or write its summaries to a gs:// or s3:// dir")
    try:
        stored = json.loads(data[TENSORBOARD_KEY])
    except ValueError:
        stored = None
    image = _image(stored)
    spec = plan.spec
    workspace_layer = (spec.workspace is not None and spec.tensorboard.image is None and image is not None
                       and is_workspace_tag(image, plan.name, spec.kubernetes.registry))
    board = json.loads(json.dumps(tensorboard_objects(plan, image if workspace_layer else None)))  # as stored
    if stored != board:
        raise LaunchError(f"ConfigMap {config_map} holds TensorBoard objects that are not the board of run {plan.name!r} "
                          "(edited after the launch, or launched by another tfcluster version?): refusing to apply them")
    return board


def _image(stored: Any) -> str | None:
    """The image of the first container of ``stored``'s first object (its Deployment), if it has one."""
    try:
        image = stored[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    except (LookupError, TypeError):
        return None
    return image if isinstance(image, str) else None


def shared_board(runs: Sequence[BoardRun], template: Sequence[Manifest]) -> list[Manifest]:
    """One TensorBoard showing several ``runs`` side by side: the objects ``tensorboard_objects`` makes for one.

    ``template`` is the first run's board (``checked_board``): its
    Deployment's pod settings (image, service account, hardening, node
    settings) and its objects' namespace and labels (``LABEL_CLUSTER`` of
    that run) are kept. The name is ``naming.shared_tensorboard_name`` of
    the runs, the pod labels ``naming.tensorboard_labels`` of that name.
    A run whose log dir is on its claim has the claim mounted read-only at
    ``/runs/<name>`` and is read there (``--logdir_spec
    name:/runs/<name>/<log dir relative to its checkpoint dir>``); a bucket
    log dir is read as it is, with the ``envFrom`` secrets of all runs.
    ``LaunchError`` for a local log dir outside its run's checkpoint claim.
    """
    [deployment, *_] = template
    pod = deployment["spec"]["template"]["spec"]
    dirs: dict[str, str] = {}
    claims: list[_BoardClaim] = []
    for run in runs:
        if is_object_store(run.log_dir):
            dirs[run.name] = run.log_dir
            continue
        if run.claim is None or not is_within(run.log_dir, run.checkpoint_dir):
            raise LaunchError(f"run {run.name!r} writes its summaries to {run.log_dir}, outside its checkpoint claim: "
                              "a TensorBoard pod cannot read them")
        mount = posixpath.join(BOARD_RUNS_DIR, run.name)
        dirs[run.name] = posixpath.normpath(posixpath.join(mount, posixpath.relpath(run.log_dir, run.checkpoint_dir)))
        claims.append(_BoardClaim(naming.checkpoint_volume_name(run.name), run.claim, mount))
    name = naming.shared_tensorboard_name(run.name for run in runs)
    meta = deployment["metadata"]
    return _board_objects(
        {"name": name, "namespace": meta["namespace"], "labels": dict(meta["labels"])},
        naming.tensorboard_labels(name),
        copy.deepcopy(pod),
        pod["containers"][0]["image"],
        dirs,
        list(dict.fromkeys(secret for run in runs for secret in run.secrets)),
        claims,
    )


@dataclass(frozen=True)
class _BoardClaim:
    """A checkpoint claim a TensorBoard pod mounts read-only: its volume name, the claim, where it is mounted."""

    volume: str
    claim: str
    path: str


def _board_objects(meta: dict[str, Any], labels: dict[str, str], pod: dict[str, Any], image: str, dirs: Mapping[str, str],
                   secrets: Sequence[str], claims: Sequence[_BoardClaim]) -> list[Manifest]:
    """A TensorBoard's Deployment, Service and NetworkPolicy (``meta``): TensorBoard reading ``dirs`` in a pod
    of ``image`` with the settings ``pod`` (whose containers and volumes it replaces), the ``claims`` mounted
    read-only."""
    mounts: list[dict[str, Any]] = [{"name": TMP_VOLUME, "mountPath": TMP_DIR}]
    volumes: list[dict[str, Any]] = [{"name": TMP_VOLUME, "emptyDir": {}}]
    for claim in claims:
        mounts.append({"name": claim.volume, "mountPath": claim.path, "readOnly": True})
        volumes.append({"name": claim.volume, "persistentVolumeClaim": {"claimName": claim.claim, "readOnly": True}})
    container: dict[str, Any] = {
        "name": TENSORBOARD_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "args": tensorboard.command(dirs, "0.0.0.0", tensorboard.PORT),
        "ports": [{"name": "http", "containerPort": tensorboard.PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/data/logdir", "port": "http"}, "periodSeconds": 5},
    }
    if secrets:
        container["envFrom"] = [{"secretRef": {"name": n}} for n in secrets]
    container["securityContext"] = container_security()
    container["volumeMounts"] = mounts
    # Keys keep their place in ``pod`` (the stored JSON stays as it was).
    template = {"metadata": {"labels": labels}, "spec": {**pod, "containers": [container], "volumes": volumes}}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": copy.deepcopy(meta),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": copy.deepcopy(meta),
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "http", "port": tensorboard.PORT, "targetPort": "http", "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": copy.deepcopy(meta),
            "spec": {
                "podSelector": {"matchLabels": labels},
                # No pod may connect: ``tfcluster tensorboard`` reaches it by a port-forward, through the kubelet.
                "policyTypes": ["Ingress"],
                "ingress": [],
            },
        },
    ]
