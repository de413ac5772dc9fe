"""Wait until every peer host in TF_CONFIG resolves, before a multi-worker strategy is built.

Contract: ``wait_for_peers(addresses, timeout)`` returns once each host
resolves (``socket.getaddrinfo``); after ``timeout`` seconds it raises
``PeerUnavailable`` naming the hosts that never resolved. On Kubernetes a
pod's DNS name appears some seconds after the pod starts, and a collective
started before that fails for good. No TensorFlow.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable

from launcher.worker.task_errors import PeerUnavailable

DEFAULT_TIMEOUT_S = 300.0


def host_of(address: str) -> str:
    """The host part of ``host:port`` (also ``[v6]:port``)."""
    if address.startswith("["):
        return address[1 : address.index("]")]
    return address.rsplit(":", 1)[0]


def _resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


def wait_for_peers(
    addresses: Iterable[str],
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    resolves: Callable[[str], bool] = _resolves,
    poll: float = 1.0,
) -> None:
    pending = sorted({host_of(a) for a in addresses})
    deadline = time.monotonic() + timeout
    while True:
        pending = [h for h in pending if not resolves(h)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise PeerUnavailable(f"peer host(s) did not resolve within {timeout:g}s: {', '.join(pending)}")
        time.sleep(poll)
