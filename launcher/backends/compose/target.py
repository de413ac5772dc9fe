"""Addressing on the compose backend: the service hostname is the task name."""

from __future__ import annotations

from launcher.plan import naming
from launcher.plan.targets import BackendKind, Target
from launcher.protocol.standby import ON_SIGNAL
from launcher.spec.models import ClusterSpec, RoleType


class ComposeTarget(Target):
    """One container per task on the cluster's network."""

    kind = BackendKind.COMPOSE
    keeps_standbys = True

    def standby(self) -> list[str]:
        """A standby container's: called by a signal (``launcher.backends.compose.standbys``)."""
        return [*super().standby(), ON_SIGNAL]

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"{naming.task_name(spec.name, role, index)}:{spec.roles.role(role).port}"


def target(spec: ClusterSpec, *, launching: bool = False) -> ComposeTarget:
    return ComposeTarget()
