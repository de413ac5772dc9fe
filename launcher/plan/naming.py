"""Every name derived from a cluster's name, and the one label scheme every backend puts on what it creates.

Contract: a task's name is also its hostname on the container backends and
its pod hostname on Kubernetes, so TF_CONFIG addresses resolve there. Every
name here must fit a DNS-1123 label (63 chars): ``name_problems(spec)``
reports a spec whose longest derived name would not, before anything is
planned. The controller's own files live under ``state_dir(backend, name)``;
``cluster_name(name)`` refuses (``LaunchError``) a name no spec can have,
before it is used in a path (``../..`` would reach the user's files).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from launcher.errors import LaunchError
from launcher.spec.models import DNS_LABEL, ClusterSpec, RoleType
from launcher.spec.problems import Problem

MAX_DNS_LABEL = 63
#: A cluster name derived from a program name is cut here, leaving room for the derived names.
MAX_DERIVED_NAME = 30

#: Labels on every object a backend creates (containers, networks, volumes, Kubernetes objects, pods).
LABEL_CLUSTER = "tfcluster.io/cluster"
LABEL_ROLE = "tfcluster.io/role"
LABEL_INDEX = "tfcluster.io/index"
LABEL_TASK = "tfcluster.io/task"
LABEL_RUN = "tfcluster.io/run-id"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
MANAGER = "tfcluster"
#: Label keys that tfcluster or Kubernetes' Job controller set (prefixes, then whole keys): the spec's own
#: ``kubernetes.labels`` and ``pod_labels`` may not use them (selectors would break).
RESERVED_LABEL_PREFIXES = ("tfcluster.io/", "batch.kubernetes.io/")
RESERVED_LABELS = frozenset({LABEL_MANAGED, "job-name", "controller-uid"})
#: On a run's TensorBoard container / pods instead of ``LABEL_CLUSTER`` (which would put them among the run's tasks).
LABEL_TENSORBOARD = "tfcluster.io/tensorboard"
#: On every object of a run's in-cluster supervisor; its Job and pod carry it instead of ``LABEL_CLUSTER`` (which would
#: put them among the tasks), its ServiceAccount, Role and RoleBinding besides it.
LABEL_SUPERVISOR = "tfcluster.io/supervisor"
#: Hex digits of the hash naming a board shared by several runs.
SHARED_BOARD_HASH = 10


def labels(cluster: str, run_id: str, role: RoleType | None = None, index: int | None = None) -> dict[str, str]:
    """The labels of an object of ``cluster``: of one role's objects with ``role``, of one task's with ``index`` too."""
    result = {LABEL_MANAGED: MANAGER, LABEL_CLUSTER: cluster, LABEL_RUN: run_id}
    if role is not None:
        result[LABEL_ROLE] = role.value
        if index is not None:
            result[LABEL_INDEX] = str(index)
            result[LABEL_TASK] = task_name(cluster, role, index)
    return result


def task_name(cluster: str, role: RoleType, index: int) -> str:
    return f"{cluster}-{role.value}-{index}"


def network_name(cluster: str) -> str:
    return f"{cluster}-net"


def checkpoint_volume_name(cluster: str) -> str:
    return f"{cluster}-checkpoints"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-tfconfig"


def service_name(cluster: str) -> str:
    """Headless Service whose name is the pods' DNS subdomain."""
    return cluster


def network_policy_name(cluster: str) -> str:
    return f"{cluster}-policy"


def service_account_name(cluster: str) -> str:
    return f"{cluster}-runner"


def supervisor_name(cluster: str) -> str:
    """A Kubernetes run's in-cluster supervisor: its Job, ServiceAccount, Role and RoleBinding."""
    return f"{cluster}-supervisor"


def admission_params_name(cluster: str) -> str:
    """A Kubernetes run's params of the admission policy that holds its supervisor to the run."""
    return f"{cluster}-admission"


def pod_group_name(cluster: str) -> str:
    """A Kubernetes run's PodGroup: its task pods placed all together or not at all."""
    return f"{cluster}-gang"


def supervisor_labels(cluster: str, run_id: str) -> dict[str, str]:
    """Labels of a run's supervisor Job and pod (not ``LABEL_CLUSTER``: they are not tasks)."""
    return {LABEL_MANAGED: MANAGER, LABEL_SUPERVISOR: cluster, LABEL_RUN: run_id}


def tensorboard_name(cluster: str) -> str:
    """The TensorBoard of a run: compose container; Kubernetes Deployment, Service and NetworkPolicy."""
    return f"{cluster}-tensorboard"


def tensorboard_labels(cluster: str) -> dict[str, str]:
    """Labels of a run's TensorBoard container and pods (not ``LABEL_CLUSTER``: they are not tasks);
    ``cluster`` is a shared board's ``shared_tensorboard_name`` for a board of several runs."""
    return {LABEL_MANAGED: MANAGER, LABEL_TENSORBOARD: cluster}


def shared_tensorboard_name(clusters: Iterable[str]) -> str:
    """The Kubernetes TensorBoard showing several runs: one fixed-length DNS label per set of run names
    (``tfcluster-tensorboard-<10 hex>``, a hash of the sorted names; the order they are given in does not matter)."""
    digest = hashlib.sha256("\n".join(sorted(set(clusters))).encode()).hexdigest()
    return f"{MANAGER}-tensorboard-{digest[:SHARED_BOARD_HASH]}"


def cluster_scoped_names(cluster: str) -> list[str]:
    """Every per-cluster (not per-task) name a backend may create."""
    return [
        network_name(cluster),
        checkpoint_volume_name(cluster),
        config_map_name(cluster),
        service_name(cluster),
        network_policy_name(cluster),
        service_account_name(cluster),
        tensorboard_name(cluster),
        supervisor_name(cluster),
        admission_params_name(cluster),
        pod_group_name(cluster),
    ]


def name_for_program(program: str) -> str:
    """A cluster name (DNS-1123 label) for a script path or module: ``train_mnist.py`` -> ``train-mnist``."""
    stem = program.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py").rsplit(".", 1)[-1]
    label = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")
    if not label[:1].isalpha():
        label = f"run-{label}".rstrip("-")
    return label[:MAX_DERIVED_NAME].rstrip("-")


def name_problems(spec: ClusterSpec) -> list[Problem]:
    """A problem at ``name`` if some derived name would exceed the DNS label limit."""
    longest = max(
        [task_name(spec.name, r, spec.roles.replicas(r) - 1) for r in RoleType if spec.roles.replicas(r)]
        + cluster_scoped_names(spec.name),
        key=len,
    )
    if len(longest) <= MAX_DNS_LABEL:
        return []
    return [
        Problem(
            "name",
            f"too long: derived name {longest!r} is {len(longest)} chars, over the DNS limit of "
            f"{MAX_DNS_LABEL}; shorten the name by {len(longest) - MAX_DNS_LABEL}",
        )
    ]


def home() -> Path:
    """Where the controller keeps its state: ``$TFCLUSTER_HOME``, default ``~/.tfcluster``."""
    return Path(os.environ.get("TFCLUSTER_HOME", Path.home() / ".tfcluster"))


def cluster_name(name: str) -> str:
    """``name`` if a spec can name a cluster so (a DNS-1123 label), else ``LaunchError``."""
    if len(name) > MAX_DNS_LABEL or not re.fullmatch(DNS_LABEL, name):
        raise LaunchError(f"{name!r} is not a cluster name (a DNS-1123 label: lowercase letters, digits and '-')")
    return name


def state_dir(backend: str, cluster: str) -> Path:
    """The controller's files of one cluster on one backend (plan, status, supervisor pid and log)."""
    return home() / backend / cluster_name(cluster)
