"""Where the tasks of a plan run in an allocation, and what the allocation is sized for: pure functions.

Contract: ``resolve(plan, nodes, job_id, secret)`` replaces every ``${node:SLOT}`` with node
``SLOT % len(nodes)``'s address and every ``${port:I}`` with ``first_port(...) + I``, and gives each
task's node; the supervisor calls it once per allocation. ``first_port`` is the one home of the
job's port block (``slurm.ports``: ``random`` offsets by the private secret, ``job-id`` by none).
``port_block_problems(spec)`` is ``validate``'s rule (the block fits below 65536);
``allocation_options(plan)`` gives the ``sbatch`` options sizing one allocation for every task.
The port rule as a user meets it: docs/slurm.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from launcher.backends.slurm.target import NODE_PLACEHOLDER, PORT_PLACEHOLDER, base_port
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.spec.models import ClusterSpec, RoleType, SlurmPorts
from launcher.spec.problems import Problem
from launcher.spec.quantities import byte_count

MIB = 2**20
#: The ports above a job's base port its block of ports may take (below 32768, where Linux's ephemeral ports
#: start, for the default base port 2222).
PORT_SPAN = 10000
MAX_PORT = 65535


class Node(NamedTuple):
    name: str
    address: str


def port_blocks(base: int, tasks: int) -> int:
    """How many blocks of ``tasks`` consecutive ports a job starting at ``base`` may take: those in the
    ``PORT_SPAN`` ports from ``base``, at least the first when it fits below 65536 (0: not even that)."""
    if base + tasks - 1 > MAX_PORT:
        return 0
    return max(1, min(PORT_SPAN, MAX_PORT + 1 - base) // tasks)


def port_block_problems(spec: ClusterSpec) -> list[Problem]:
    """A problem at the base role's ``port`` when the job's tasks cannot take consecutive ports below 65536."""
    tasks = sum(spec.roles.replicas(role) for role in RoleType)
    base = base_port(spec)
    if port_blocks(base, tasks):
        return []
    role = next(r for r in RoleType if spec.roles.replicas(r) and spec.roles.role(r).port == base)
    return [Problem(f"roles.{role.value}.port", f"the job's {tasks} tasks take consecutive ports from {base} on, "
                                                f"up to {base + tasks - 1}, past {MAX_PORT}: lower the port or use "
                                                "fewer tasks")]


def first_port(plan: Plan, job_id: str, secret: int) -> int:
    """The first port of job ``job_id``'s block, ``secret`` its offset under ``slurm.ports: random``."""
    tasks = len(plan.tasks)
    base = min(task.port for task in plan.tasks)
    blocks = port_blocks(base, tasks)
    if not blocks:
        raise LaunchError(f"the job's {tasks} tasks do not fit in ports {base} to {MAX_PORT}")
    offset = secret if plan.spec.slurm.ports is SlurmPorts.RANDOM else 0
    return base + (int(job_id) + offset) % blocks * tasks


def resolve(plan: Plan, nodes: list[Node], job_id: str, secret: int) -> tuple[Plan, dict[str, str]]:
    """``plan`` with its placeholders resolved on ``nodes`` for job ``job_id`` (whose port secret is ``secret``),
    and ``{task name: node name}``."""
    if not nodes:
        raise LaunchError("the allocation has no nodes (SLURM_JOB_NODELIST is empty)")
    first = first_port(plan, job_id, secret)

    def node(slot: str) -> Node:
        return nodes[int(slot) % len(nodes)]

    def address(planned: str) -> str:
        on_node = NODE_PLACEHOLDER.sub(lambda match: node(match.group(1)).address, planned)
        return PORT_PLACEHOLDER.sub(lambda match: str(first + int(match.group(1))), on_node)

    placement = {}
    tasks = []
    for task in plan.tasks:
        slot = NODE_PLACEHOLDER.match(task.address)
        if slot is None:
            raise LaunchError(f"{task.name}: address {task.address!r} names no node of the allocation")
        placement[task.name] = node(slot.group(1)).name
        resolved = address(task.address)
        tasks.append(task.model_copy(update={"address": resolved, "port": int(resolved.rsplit(":", 1)[1])}))
    cluster = {role: [address(a) for a in addresses] for role, addresses in plan.cluster.items()}
    return plan.model_copy(update={"tasks": tasks, "cluster": cluster}), placement


def task_resources(plan: Plan) -> tuple[int | None, int | None, int]:
    """(CPUs, MiB of memory, GPUs) per task: the largest any task requests (None: not requested)."""
    cpus = [t.resources.cpu for t in plan.tasks if t.resources.cpu]
    memory = [byte_count(t.resources.memory) for t in plan.tasks if t.resources.memory]
    return (math.ceil(max(cpus)) if cpus else None, math.ceil(max(memory) / MIB) if memory else None,
            max(t.resources.gpu for t in plan.tasks))


def allocation_options(plan: Plan) -> list[str]:
    slurm = plan.spec.slurm
    tasks = len(plan.tasks)
    options = [f"--job-name={plan.name}", f"--ntasks={tasks}"]
    if slurm.tasks_per_node:
        options += [f"--nodes={math.ceil(tasks / slurm.tasks_per_node)}", f"--ntasks-per-node={slurm.tasks_per_node}"]
    else:
        options.append("--spread-job")
    cpus, memory, gpus = task_resources(plan)
    if cpus:
        options.append(f"--cpus-per-task={cpus}")
    if memory:
        options.append(f"--mem-per-cpu={math.ceil(memory / (cpus or 1))}M")
    if gpus:
        options.append(f"--gpus-per-task={gpus}")
    for flag, value in (("partition", slurm.partition), ("account", slurm.account), ("qos", slurm.qos),
                        ("time", slurm.time_limit), ("constraint", slurm.constraint)):
        if value:
            options.append(f"--{flag}={value}")
    if slurm.exclusive:
        options.append("--exclusive")
    return [*options, *slurm.sbatch_options]
