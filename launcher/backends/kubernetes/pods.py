"""What every pod and object of a Kubernetes run is built from: pure data, no Kubernetes client import.

Contract: ``meta`` names and labels an object; ``hardened_pod`` and
``container_security`` are the identity and hardening every pod shares
(tasks and TensorBoard: non-root, read-only root filesystem, no API token);
the constants name the volumes tfcluster mounts and the keys of the run's
ConfigMap (``JOB_KEY``: the ``RunConfig``; ``CLUSTER_KEY``: the training
cluster; ``TENSORBOARD_KEY``: the run's TensorBoard objects; ``SPEC_KEY``: the spec without its env values,
not mounted in any pod, from which ``report`` plans the run again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.plan import naming
from launcher.plan.images import TASK_UID
from launcher.plan.planner import Plan
from launcher.protocol.paths import is_object_store
from launcher.spec.models import RoleType, Toleration

Manifest = dict[str, Any]

CONFIG_DIR = "/etc/tfcluster"
#: The tasks' (and TensorBoard's) writable scratch space, an ``emptyDir``.
TMP_DIR = "/tmp"
CLUSTER_KEY = "cluster.json"
JOB_KEY = "job.json"
TENSORBOARD_KEY = "tensorboard.json"
SPEC_KEY = "spec.json"
#: The pod volumes tfcluster itself mounts: scratch at /tmp, the cluster file, the checkpoint claim,
#: the writable copy of the workspace.
TMP_VOLUME, CONFIG_VOLUME, CHECKPOINT_VOLUME, WORKSPACE_VOLUME = "tmp", "tfcluster", "checkpoints", "workspace"


def meta(plan: Plan, name: str, role: RoleType | None = None) -> dict[str, Any]:
    """Name, namespace and labels of an object tfcluster creates: the spec's ``kubernetes.labels``, then its own."""
    k8s = plan.spec.kubernetes
    return {"name": name, "namespace": k8s.namespace, "labels": {**k8s.labels, **naming.labels(plan.name, plan.run_id, role)}}


def container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def hardened_pod(plan: Plan, containers: list[Manifest], volumes: list[Manifest]) -> dict[str, Any]:
    """The pod fields every pod of a run shares: non-root, the spec's node settings, and tfcluster's
    service account with no API token (or the spec's own service account, whose token setting applies)."""
    k8s = plan.spec.kubernetes
    identity: dict[str, Any] = {"serviceAccountName": task_account(plan)}
    if not k8s.service_account:
        identity["automountServiceAccountToken"] = False
    return {
        **identity,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TASK_UID,
            "runAsGroup": TASK_UID,
            "fsGroup": TASK_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": containers,
        "volumes": volumes,
        **placement(plan),
    }


def task_account(plan: Plan) -> str:
    """The ServiceAccount a run's task pods run as: the spec's own, else tfcluster's ``<name>-runner``."""
    return plan.spec.kubernetes.service_account or naming.service_account_name(plan.name)


def placement(plan: Plan) -> dict[str, Any]:
    """Where the spec lets a run's task (and TensorBoard) pods go and what they may pull: node selector,
    tolerations, pull secrets."""
    k8s = plan.spec.kubernetes
    return _placed(k8s.node_selector, k8s.tolerations, k8s.image_pull_secrets)


def supervisor_placement(plan: Plan) -> dict[str, Any]:
    """Where the run's supervisor pod goes: its own node selector and tolerations
    (``kubernetes.supervisor_placement``), never the tasks' (a GPU or a simulated node is theirs); the run's pull
    secrets (it runs tfcluster's image from the same registries)."""
    k8s = plan.spec.kubernetes
    own = k8s.supervisor_placement
    return _placed(own.node_selector, own.tolerations, k8s.image_pull_secrets)


def _placed(node_selector: Mapping[str, str], tolerations: Sequence[Toleration],
            pull_secrets: Sequence[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if node_selector:
        fields["nodeSelector"] = dict(node_selector)
    if tolerations:
        fields["tolerations"] = [camel(t.model_dump(exclude_none=True)) for t in tolerations]
    if pull_secrets:
        fields["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    return fields


def priority(plan: Plan) -> dict[str, Any]:
    """The ``priorityClassName`` of a run's task pods and of its supervisor's pod (``kubernetes.priority_class``):
    the same class, so the scheduler never evicts the supervisor for its own tasks nor for a pod they would not
    yield to, and it waits for room as they do (docs/kubernetes.md, "Priorities")."""
    name = plan.spec.kubernetes.priority_class
    return {"priorityClassName": name} if name else {}


def camel(fields: dict[str, Any]) -> dict[str, Any]:
    def convert(key: str) -> str:
        head, *rest = key.split("_")
        return head + "".join(word.title() for word in rest)

    return {convert(k): v for k, v in fields.items()}


def checkpoint_claim_name(plan: Plan) -> str | None:
    """The claim mounted at the checkpoint dir: the spec's existing one, the created one, or None for URLs."""
    if is_object_store(plan.run_config.checkpoint_dir):
        return None
    return plan.spec.kubernetes.volume_claim.name or naming.checkpoint_volume_name(plan.name)
