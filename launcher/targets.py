"""Backend addressing: how a task is reached and what it runs, per backend.

Contract: a ``Target`` answers, for a given spec, each task's address
(host:port as other tasks dial it), the default checkpoint dir and the
entrypoint command. The planner asks only this interface, so a new backend
adds one ``Target`` and the planner stays unchanged.
"""

from __future__ import annotations

import socket
import sys
from abc import ABC, abstractmethod
from contextlib import ExitStack
from enum import Enum
from pathlib import Path

from launcher import naming
from launcher.spec import ClusterSpec, RoleType

CONTAINER_CHECKPOINT_DIR = "/checkpoints"
CONTAINER_ENTRYPOINT = ["python", "-m", "launcher.worker"]


class BackendKind(str, Enum):
    LOCAL = "local"
    COMPOSE = "compose"
    K8S = "k8s"


class Target(ABC):
    kind: BackendKind

    @abstractmethod
    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        """Address of task ``role``/``index``; ``ordinal`` counts all tasks from 0 in plan order."""

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        return spec.roles.role(role).port

    def checkpoint_dir(self, spec: ClusterSpec) -> str:
        return spec.checkpoint.dir or CONTAINER_CHECKPOINT_DIR

    def entrypoint(self) -> list[str]:
        return list(CONTAINER_ENTRYPOINT)


class LocalTarget(Target):
    """Loopback processes. Ports are given: sequential for previews, free ones at launch."""

    kind = BackendKind.LOCAL

    def __init__(self, ports: list[int], workdir: Path | None = None):
        self.ports = ports
        self.workdir = (workdir or Path.cwd()).resolve()

    @classmethod
    def preview(cls, count: int, base_port: int = 20000, workdir: Path | None = None) -> "LocalTarget":
        """Deterministic ports for dry-run; ``up`` picks free ports instead."""
        return cls(list(range(base_port, base_port + count)), workdir)

    @classmethod
    def with_free_ports(cls, count: int, workdir: Path | None = None) -> "LocalTarget":
        """Ports the OS reports free now (all held open together, so they are distinct)."""
        with ExitStack() as stack:
            ports = []
            for _ in range(count):
                sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                sock.bind(("127.0.0.1", 0))
                ports.append(sock.getsockname()[1])
        return cls(ports, workdir)

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        return self.ports[ordinal]

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"127.0.0.1:{self.ports[ordinal]}"

    def checkpoint_dir(self, spec: ClusterSpec) -> str:
        configured = spec.checkpoint.dir
        if configured and "://" in configured:
            return configured
        return str(self.workdir / (configured or f"tfcluster-runs/{spec.name}"))

    def entrypoint(self) -> list[str]:
        return [sys.executable, "-m", "launcher.worker"]


class ComposeTarget(Target):
    """One container per task; the service hostname is the task name."""

    kind = BackendKind.COMPOSE

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"{naming.task_name(spec.name, role, index)}:{spec.roles.role(role).port}"


class KubernetesTarget(Target):
    """Pods of Indexed Jobs; ``<task>.<headless service>`` resolves inside the namespace."""

    kind = BackendKind.K8S

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        host = f"{naming.task_name(spec.name, role, index)}.{naming.service_name(spec.name)}"
        return f"{host}:{spec.roles.role(role).port}"


def target_for(kind: BackendKind, spec: ClusterSpec, *, free_ports: bool = False) -> Target:
    """The target of ``kind``; local gets free ports when launching, sequential ones for previews."""
    if kind is BackendKind.LOCAL:
        count = sum(spec.roles.replicas(r) for r in RoleType)
        return LocalTarget.with_free_ports(count) if free_ports else LocalTarget.preview(count)
    return {BackendKind.COMPOSE: ComposeTarget, BackendKind.K8S: KubernetesTarget}[kind]()
