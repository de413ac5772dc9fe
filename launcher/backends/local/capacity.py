"""Will a cluster fit this machine? The memory check ``up`` makes on the local backend (``--force`` skips it).

Contract: ``memory_problems(spec)`` returns one problem at ``roles`` when the
tasks' memory, estimated per task from its role's ``resources.memory`` and
otherwise ``TASK_MEMORY_FLOOR``, plus ``STANDBY_MEMORY_FLOOR`` per zygote when the job has standbys
(``restart.warm``: a training task of the entrypoint; one zygote holds TensorFlow for all of them whose roles share
their env, ``launcher.worker.zygote``), exceeds what Linux reports available
(``MemAvailable`` in /proc/meminfo); none when it fits or the machine does
not say. A floor, not a forecast: only a cluster that clearly cannot fit is
refused. Reads /proc only, imports no TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

from launcher.plan.programs import wants_standby
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem
from launcher.spec.quantities import byte_count
from launcher.spec.rules import resolve_strategy

#: Memory a task running the TensorFlow entrypoint takes at the least (TF + tf_keras imported, a
#: small model built): measured ~0.5-0.7 GiB resident per MNIST task here; the floor is below that.
TASK_MEMORY_FLOOR = 512 * 2**20
#: Memory the standbys' zygote takes (TF + tf_keras imported, once for every standby): measured ~547 MiB resident
#: here; a standby itself (a small interpreter that imports nothing) is far below the floors.
STANDBY_MEMORY_FLOOR = 512 * 2**20
MEMINFO = Path("/proc/meminfo")
GIB = 2**30


def mem_available(meminfo: Path = MEMINFO) -> int | None:
    """Bytes Linux estimates can be allocated without swapping, or None if it does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_needed(spec: ClusterSpec) -> int:
    """The tasks' memory at the least: each role's ``resources.memory``, else ``TASK_MEMORY_FLOOR``, per task;
    and ``STANDBY_MEMORY_FLOOR`` for each of the standbys' zygotes."""
    total = STANDBY_MEMORY_FLOOR * zygotes(spec)
    for role in RoleType:
        role_spec = spec.roles.role(role)
        memory = role_spec.resources.memory
        total += role_spec.replicas * (byte_count(memory) if memory else TASK_MEMORY_FLOOR)
    return total


def standbys(spec: ClusterSpec) -> int:
    """How many standbys the local backend keeps for the job (``launcher.plan.programs.wants_standby``)."""
    strategy = resolve_strategy(spec)
    return sum(spec.roles.replicas(role) for role in RoleType if wants_standby(spec, role, strategy))


def zygotes(spec: ClusterSpec) -> int:
    """How many zygotes hold TensorFlow for the standbys: one per distinct env of the roles that keep standbys
    (``launcher.backends.local.processes``: tasks of the same environment share one)."""
    strategy = resolve_strategy(spec)
    return len({tuple(sorted(spec.roles.role(role).env.items())) for role in RoleType
                if spec.roles.replicas(role) and wants_standby(spec, role, strategy)})


def memory_problems(spec: ClusterSpec, available: int | None = None) -> list[Problem]:
    available = mem_available() if available is None else available
    needed = memory_needed(spec)
    if available is None or needed <= available:
        return []
    tasks = sum(spec.roles.replicas(r) for r in RoleType)
    waiting, holding = standbys(spec), zygotes(spec)
    also = (f" and their {waiting} standbys ({holding} process{'es' if holding > 1 else ''} holding TensorFlow for them, "
            f"{STANDBY_MEMORY_FLOOR // 2**20} MiB each; `restart.warm: false` keeps none)") if waiting else ""
    return [Problem("roles", f"the {tasks} tasks{also} need at least {needed / GIB:.1f} GiB (resources.memory, else "
                             f"{TASK_MEMORY_FLOOR // 2**20} MiB per task), over the {available / GIB:.1f} GiB this "
                             f"machine has available; `up --force` starts them anyway")]
