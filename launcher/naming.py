"""Names derived from the cluster name, shared by every backend.

Contract: a task's name is also its hostname on the container backends and
its pod hostname on Kubernetes, so TF_CONFIG addresses resolve there. Every
name here must fit a DNS-1123 label (63 chars); ``launcher.topology`` checks
that for a spec before anything is planned.
"""

from __future__ import annotations

from launcher.spec import RoleType

MAX_DNS_LABEL = 63


def task_name(cluster: str, role: RoleType, index: int) -> str:
    return f"{cluster}-{role.value}-{index}"


def role_job_name(cluster: str, role: RoleType) -> str:
    """Kubernetes Indexed Job of one role; its pods are ``<job>-<index>`` = the task names."""
    return f"{cluster}-{role.value}"


def network_name(cluster: str) -> str:
    return f"{cluster}-net"


def checkpoint_volume_name(cluster: str) -> str:
    return f"{cluster}-checkpoints"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-tfconfig"


def service_name(cluster: str) -> str:
    """Headless Service whose name is the pods' DNS subdomain."""
    return cluster


def cluster_scoped_names(cluster: str) -> list[str]:
    """Every per-cluster (not per-task) name a backend may create."""
    return [
        network_name(cluster),
        checkpoint_volume_name(cluster),
        config_map_name(cluster),
        service_name(cluster),
        f"{cluster}-policy",
        f"{cluster}-runner",
    ]
