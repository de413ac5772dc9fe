"""Addressing on Slurm: tasks on the allocation's nodes, which only the allocation knows.

Contract: a planned task's address is ``${node:SLOT}:PORT``; ``SLOT`` is the
task's place in the allocation (``node_slot``) and ``PORT`` is the job's base
port (the lowest of its roles' ``port``) plus the task's ordinal, so no two
tasks of a job share a port, on any node. The in-allocation supervisor
replaces each placeholder with the address Slurm gives that node
(``launcher.backends.slurm.placement.resolve``). Checkpoints and the tasks'
working directory default to the submit directory (as ``sbatch`` does),
which must be on the filesystem every node shares. Tasks run the
interpreter ``slurm.python`` names, else the one running tfcluster.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from launcher.plan.targets import BackendKind, ProcessTarget
from launcher.spec.models import ClusterSpec, RoleType

#: A node of the allocation in a planned address: ``${node:0}`` is the allocation's first node.
NODE_PLACEHOLDER = re.compile(r"\$\{node:(\d+)\}")


def node_placeholder(slot: int) -> str:
    return f"${{node:{slot}}}"


def node_slot(spec: ClusterSpec, ordinal: int) -> int:
    """The node slot of the task ``ordinal``: ``tasks_per_node`` tasks per node in plan order, else one per
    slot (spread); slots past the allocation's node count wrap around (``placement.resolve``)."""
    per_node = spec.slurm.tasks_per_node
    return ordinal // per_node if per_node else ordinal


def python(spec: ClusterSpec) -> str:
    """The interpreter on the nodes: ``slurm.python``, else the one running tfcluster (a shared venv)."""
    return spec.slurm.python or sys.executable


class SlurmTarget(ProcessTarget):
    """Processes on the allocation's nodes, in the submit directory (on the shared filesystem)."""

    kind = BackendKind.SLURM

    def __init__(self, spec: ClusterSpec, workdir: Path | None = None):
        super().__init__(python(spec), workdir)

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        base = min(spec.roles.role(r).port for r in RoleType if spec.roles.replicas(r))
        return base + ordinal

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"{node_placeholder(node_slot(spec, ordinal))}:{self.port(spec, role, ordinal)}"
