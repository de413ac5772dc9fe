"""Addressing on Kubernetes: ``<task>.<headless service>`` resolves inside the namespace."""

from __future__ import annotations

from launcher.plan import naming
from launcher.plan.targets import BackendKind, Target
from launcher.spec.models import ClusterSpec, RoleType


class KubernetesTarget(Target):
    """Pods of Indexed Jobs, whose hostnames are the task names."""

    kind = BackendKind.K8S

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        host = f"{naming.task_name(spec.name, role, index)}.{naming.service_name(spec.name)}"
        return f"{host}:{spec.roles.role(role).port}"


def target(spec: ClusterSpec, *, launching: bool = False) -> KubernetesTarget:
    return KubernetesTarget()
