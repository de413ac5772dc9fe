"""Addressing on Slurm: tasks on the allocation's nodes, which only the allocation knows.

Contract: a planned task's address is ``${node:SLOT}:${port:ORDINAL}``;
``SLOT`` is the task's place in the allocation (``node_slot``) and the port
is the job's first port plus the task's ordinal, so no two tasks of a job
share a port, on any node. The job's first port is known only in the
allocation (it depends on Slurm's job id, so that jobs sharing a node get
different ports): the in-allocation supervisor replaces each placeholder with
the address Slurm gives that node and that port
(``launcher.backends.slurm.placement.resolve``); the planned ``Task.port`` is
the job's base port (the lowest of its roles' ``port``) plus the ordinal,
the port the task gets when the job's port block is its first one. Checkpoints and the tasks'
working directory default to the submit directory (as ``sbatch`` does),
which must be on the filesystem every node shares (``NODE_LOCAL_DIRS`` are
not: ``SlurmTarget.storage`` says so to ``launcher.plan.storage``). Tasks run the
interpreter ``slurm.python`` names, else the one running tfcluster.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

from launcher.plan.targets import BackendKind, ProcessTarget, Storage
from launcher.protocol.standby import ON_SIGNAL
from launcher.spec.models import ClusterSpec, RoleType

#: A node of the allocation in a planned address: ``${node:0}`` is the allocation's first node.
NODE_PLACEHOLDER = re.compile(r"\$\{node:(\d+)\}")
#: A port of the job in a planned address: ``${port:2}`` is the job's first port plus 2.
PORT_PLACEHOLDER = re.compile(r"\$\{port:(\d+)\}")
#: Directories that are local to each node of a cluster: a checkpoint or log dir there cannot be shared.
NODE_LOCAL_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")


def node_placeholder(slot: int) -> str:
    return f"${{node:{slot}}}"


def port_placeholder(ordinal: int) -> str:
    return f"${{port:{ordinal}}}"


def node_slot(spec: ClusterSpec, ordinal: int) -> int:
    """The node slot of the task ``ordinal``: ``tasks_per_node`` tasks per node in plan order, else one per
    slot (spread); slots past the allocation's node count wrap around (``placement.resolve``)."""
    per_node = spec.slurm.tasks_per_node
    return ordinal // per_node if per_node else ordinal


def base_port(spec: ClusterSpec) -> int:
    """The lowest ``port`` of the roles that have tasks: where the job's port blocks start."""
    return min(spec.roles.role(r).port for r in RoleType if spec.roles.replicas(r))


def python(spec: ClusterSpec) -> str:
    """The interpreter on the nodes: ``slurm.python``, else the one running tfcluster (a shared venv)."""
    return spec.slurm.python or sys.executable


class SlurmTarget(ProcessTarget):
    """Processes on the allocation's nodes, in the submit directory (on the shared filesystem)."""

    kind = BackendKind.SLURM
    keeps_standbys = True

    def __init__(self, spec: ClusterSpec, workdir: Path | None = None):
        super().__init__(python(spec), workdir)

    def standby(self) -> list[str]:
        """A standby step's: called by a signal (``launcher.backends.slurm.steps``)."""
        return [*super().standby(), ON_SIGNAL]

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        return base_port(spec) + ordinal

    def storage(self, spec: ClusterSpec) -> Storage:
        """A process target's, and every task must reach the same files: nothing node-local."""
        return replace(super().storage(spec), node_local=NODE_LOCAL_DIRS)

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"{node_placeholder(node_slot(spec, ordinal))}:{port_placeholder(ordinal)}"
