"""Addressing on the compose backend: the service hostname is the task name."""

from __future__ import annotations

from launcher.backends.compose.render import TASK_HOME
from launcher.plan import naming
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR, RUNTIME_DIRS, RUNTIME_MOUNTS, BackendKind, Storage, Target
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

    def storage(self, spec: ClusterSpec) -> Storage:
        """The checkpoint volume at ``/checkpoints`` (the image makes it the task user's: a fresh named volume takes
        its owner from the mount point, anywhere else it would be root's); the tmpfs mounts beside it."""
        own = {"/tmp": "the tasks' scratch space (tmpfs)", TASK_HOME: "the task user's home (tmpfs)"}
        return Storage(in_containers=True, volume=CONTAINER_CHECKPOINT_DIR, mounts={**own, **RUNTIME_MOUNTS},
                       owned=RUNTIME_DIRS)


def target(spec: ClusterSpec, *, launching: bool = False) -> ComposeTarget:
    return ComposeTarget()
