"""Whether a TCP port of this host is in use, as a task's TensorFlow server would find it.

Contract: ``in_use(port)`` is True when binding ``port`` on the wildcard address fails with EADDRINUSE.
The probe sets ``SO_REUSEADDR``, as gRPC's servers do, so a closed connection's TIME_WAIT is no
obstacle, and not ``SO_REUSEPORT``, so a server of another job (gRPC's do set it) counts as in use.
IPv6 first (dual-stack, it sees IPv4 listeners too), IPv4 where this host has no IPv6.
"""

from __future__ import annotations

import errno
import socket


def in_use(port: int) -> bool:
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
                continue  # an address this host cannot bind (IPv6 disabled): try the next family
            return False
    return False
