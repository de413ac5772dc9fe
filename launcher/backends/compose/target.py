"""Addressing on the compose backend: the service hostname is the task name."""

from __future__ import annotations

from launcher.plan import naming
from launcher.plan.targets import BackendKind, Target
from launcher.spec.models import ClusterSpec, RoleType


class ComposeTarget(Target):
    """One container per task on the cluster's network."""

    kind = BackendKind.COMPOSE

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"{naming.task_name(spec.name, role, index)}:{spec.roles.role(role).port}"


def target(spec: ClusterSpec, *, launching: bool = False) -> ComposeTarget:
    return ComposeTarget()
