"""Addressing on the local backend: loopback ports, checkpoints under the working directory."""

from __future__ import annotations

import socket
import sys
from contextlib import ExitStack
from pathlib import Path

from launcher.plan.targets import BackendKind, ProcessTarget
from launcher.spec.models import ClusterSpec, RoleType


class LocalTarget(ProcessTarget):
    """Loopback processes running this interpreter. Ports are given: sequential for previews, free ones at launch."""

    kind = BackendKind.LOCAL
    keeps_standbys = True

    def __init__(self, ports: list[int], workdir: Path | None = None):
        super().__init__(sys.executable, workdir)
        self.ports = ports

    @classmethod
    def preview(cls, count: int, base_port: int = 20000, workdir: Path | None = None) -> LocalTarget:
        """Deterministic ports for dry-run; ``up`` picks free ports instead."""
        return cls(list(range(base_port, base_port + count)), workdir)

    @classmethod
    def with_free_ports(cls, count: int, workdir: Path | None = None) -> LocalTarget:
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



def target(spec: ClusterSpec, *, launching: bool = False) -> LocalTarget:
    """Free ports when launching, sequential ones for previews (so dry-run output is reproducible)."""
    count = sum(spec.roles.replicas(r) for r in RoleType)
    return LocalTarget.with_free_ports(count) if launching else LocalTarget.preview(count)
