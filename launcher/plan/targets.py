"""Backend addressing: the interface the planner asks how a task is reached and what it runs.

Contract: a ``Target`` answers, for a given spec, each task's address
(host:port as other tasks dial it), its port, the default checkpoint dir
the entrypoint command and the tasks' working directory. The planner asks only this interface; each
backend package implements its own, so a new backend adds a ``Target``
and the planner stays unchanged. ``Target.storage`` states where the target
lets a run keep its files (``Storage``: the mount points it uses itself, the
directories that are the user's or each node's own); ``launcher.plan.storage``
is the one rule that checks the spec's paths against it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from launcher.protocol.checkpoint_layout import is_object_store
from launcher.spec.models import ClusterSpec, RoleType

#: Where the checkpoint volume is mounted in every container (owned by the image's non-root user).
CONTAINER_CHECKPOINT_DIR = "/checkpoints"
#: The interpreter on the PATH of the worker image.
CONTAINER_PYTHON = "python"
CONTAINER_ENTRYPOINT = [CONTAINER_PYTHON, "-m", "launcher.worker"]
#: A container task's main process, its program's parent (``launcher.worker.agent``): signals, stacks, restarts.
AGENT_MODULE = "launcher.worker.agent"
#: What ``docker exec`` runs in a compose task's container to ask its agent (``launcher.worker.agent_relay``).
AGENT_RELAY_MODULE = "launcher.worker.agent_relay"
#: The standby a restarted task of the entrypoint becomes (``launcher.worker.standby``).
STANDBY_MODULE = "launcher.worker.standby"
#: The one process per supervisor that imports TensorFlow once and forks what local standbys become
#: (``launcher.worker.zygote``).
ZYGOTE_MODULE = "launcher.worker.zygote"
#: What every container runtime (Docker, the kubelet's) mounts in each container itself: a volume may be
#: neither at one of them, nor in one, nor hold one.
RUNTIME_MOUNTS: Mapping[str, str] = {
    "/proc": "the container's proc filesystem", "/sys": "the container's sysfs",
    "/etc/hosts": "the runtime's hosts file", "/etc/hostname": "the runtime's hostname file",
    "/etc/resolv.conf": "the runtime's DNS settings",
}
#: Directories of every container that a volume may lie in (``/dev/shm``) but neither be nor hold.
RUNTIME_DIRS: Mapping[str, str] = {"/dev": "the container's devices"}


class BackendKind(str, Enum):
    LOCAL = "local"
    COMPOSE = "compose"
    K8S = "k8s"
    SLURM = "slurm"


@dataclass(frozen=True)
class Storage:
    """Where a target lets a run keep its files (the checkpoint dir, the summaries): its path rules.

    ``in_containers``: paths name places in every task's container and must be absolute; otherwise they name
    places on the machines the tasks run on, a relative one from ``base`` (the tasks' working directory).
    ``volume``: a local checkpoint dir must be this mount point or lie in it (None: the checkpoint volume is
    mounted where the checkpoint dir says, or there is no volume). ``mounts``: what the target mounts itself
    (path -> what it is); a checkpoint dir or a volume may neither be one, lie in one, nor hold one.
    ``owned``: directories that are not the run's own (the container's devices); a checkpoint dir may lie in
    one but neither be one nor hold one. ``node_local``: directories each node
    has its own of: files every task shares cannot live there.
    """

    in_containers: bool
    base: str | None = None
    volume: str | None = None
    mounts: Mapping[str, str] = field(default_factory=dict)
    owned: Mapping[str, str] = field(default_factory=dict)
    node_local: tuple[str, ...] = ()


class Target(ABC):
    kind: BackendKind
    #: Tasks run from images (a workspace ships as an image layer) rather than as processes here.
    runs_in_containers: bool = True
    #: The interpreter the tasks run Python with: the built-in entrypoint's and ``tfcluster run``'s script's.
    python: str = CONTAINER_PYTHON
    #: The backend's runtime keeps a standby per task that has a ``Task.standby_command`` (restarts become it).
    keeps_standbys: bool = False

    @abstractmethod
    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        """Address of task ``role``/``index``; ``ordinal`` counts all tasks from 0 in plan order."""

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        return spec.roles.role(role).port

    def checkpoint_dir(self, spec: ClusterSpec) -> str:
        return spec.checkpoint.dir or CONTAINER_CHECKPOINT_DIR

    def entrypoint(self) -> list[str]:
        return list(CONTAINER_ENTRYPOINT)

    def standby(self) -> list[str]:
        """The command of a task's standby, which becomes the entrypoint (the role's ``args`` follow both)."""
        return [self.python, "-m", STANDBY_MODULE]

    def registry(self, spec: ClusterSpec) -> str | None:
        """Where images built for this launch (the workspace layer) are pushed; None: the local engine has them."""
        return None

    def workdir(self) -> str | None:
        """Where tasks start (the user's workspace); None keeps the image's working directory."""
        return None

    def task_env(self) -> dict[str, str]:
        """Environment every task gets first (the spec's ``env`` overrides it): what the backend found where the
        tasks run, e.g. the allocator it preloads on this host (``launcher.backends.tcmalloc``)."""
        return {}

    def storage(self, spec: ClusterSpec) -> Storage:
        """Where this target lets ``spec``'s run keep its files (default: in containers, beside the runtime's
        own mounts)."""
        return Storage(in_containers=True, mounts=RUNTIME_MOUNTS, owned=RUNTIME_DIRS)


class ProcessTarget(Target, ABC):
    """Tasks that are processes started in the user's workspace (local, Slurm), not containers.

    They start in ``workdir`` (default: the current directory, where ``up``/``run`` was called, so
    relative paths behave as in the user's shell), checkpoint under it (``tfcluster-runs/<name>``,
    a relative ``checkpoint.dir`` too; object stores as given) and run the built-in entrypoint
    with ``python``.
    """

    runs_in_containers = False

    def __init__(self, python: str, workdir: Path | None = None):
        self.python = python
        self.workdir_path = (workdir or Path.cwd()).resolve()

    def checkpoint_dir(self, spec: ClusterSpec) -> str:
        configured = spec.checkpoint.dir
        if configured and is_object_store(configured):
            return configured
        return str(self.workdir_path / (configured or f"tfcluster-runs/{spec.name}"))

    def entrypoint(self) -> list[str]:
        return [self.python, "-m", "launcher.worker"]

    def workdir(self) -> str:
        return str(self.workdir_path)

    def storage(self, spec: ClusterSpec) -> Storage:
        """Paths on the hosts, a relative one from the working directory. (Which directory ``down --volumes`` may
        delete is the removal guard's rule, not this one: a checkpoint dir may be one the user had.)"""
        return Storage(in_containers=False, base=self.workdir())


def zygote_command(standby_command: Sequence[str]) -> list[str] | None:
    """The zygote's command (its control channel's fd follows) for a standby that runs ``STANDBY_MODULE``, with the
    same interpreter; None for another standby program (it keeps its own imports)."""
    if list(standby_command[1:3]) != ["-m", STANDBY_MODULE]:
        return None
    return [standby_command[0], "-m", ZYGOTE_MODULE]
