"""Addressing on the local backend: loopback ports, checkpoints under the working directory, TCMalloc when installed."""

from __future__ import annotations

import random
import socket
import sys
from contextlib import ExitStack
from pathlib import Path

from launcher.backends import tcmalloc
from launcher.plan.targets import BackendKind, ProcessTarget
from launcher.spec.models import ClusterSpec, RoleType

#: The lowest port a launch takes (below it: well-known and commonly configured services).
FIRST_PORT = 20000


def ephemeral_start(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the range the kernel gives outgoing connections (32768 when it cannot be read)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class LocalTarget(ProcessTarget):
    """Loopback processes running this interpreter. Ports are given: sequential for previews, free ones at launch."""

    kind = BackendKind.LOCAL
    keeps_standbys = True

    def __init__(self, ports: list[int], workdir: Path | None = None):
        super().__init__(sys.executable, workdir)
        self.ports = ports
        self.allocator_env = tcmalloc.preload_env()  # found once: a preview shows what a launch applies

    def task_env(self) -> dict[str, str]:
        return dict(self.allocator_env)

    @classmethod
    def preview(cls, count: int, base_port: int = 20000, workdir: Path | None = None) -> LocalTarget:
        """Deterministic ports for dry-run; ``up`` picks free ports instead."""
        return cls(list(range(base_port, base_port + count)), workdir)

    @classmethod
    def with_free_ports(cls, count: int, workdir: Path | None = None) -> LocalTarget:
        """Ports free now, below the system's ephemeral range (all held open together, so they are distinct).

        Not ephemeral ones: while a task restarts, its port is free, and the kernel may give it to any
        outgoing connection (the other tasks reconnecting) as its source port; the restarted task's
        server could then not bind it. Ports are tried from a random one of ``FIRST_PORT`` .. the
        range's start, so clusters started together rarely try the same ones; the OS picks when none is free.
        """
        end = ephemeral_start()
        candidates = list(range(FIRST_PORT, end))
        first = random.randrange(len(candidates)) if candidates else 0
        with ExitStack() as stack:
            ports: list[int] = []
            for port in [*candidates[first:], *candidates[:first], *[0] * count]:
                if len(ports) == count:
                    break
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    sock.close()
                    continue
                ports.append(stack.enter_context(sock).getsockname()[1])
        return cls(ports, workdir)

    def port(self, spec: ClusterSpec, role: RoleType, ordinal: int) -> int:
        return self.ports[ordinal]

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        return f"127.0.0.1:{self.ports[ordinal]}"



def target(spec: ClusterSpec, *, launching: bool = False) -> LocalTarget:
    """Free ports when launching, sequential ones for previews (so dry-run output is reproducible)."""
    count = sum(spec.roles.replicas(r) for r in RoleType)
    return LocalTarget.with_free_ports(count) if launching else LocalTarget.preview(count)
