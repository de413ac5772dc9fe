"""``launcher.backends.ports.in_use``: the probe the local runtime waits on and the Slurm supervisor places by."""

from __future__ import annotations

import socket

from launcher.backends.ports import in_use


def _listener(address: str, reuse_port: bool = False) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    if reuse_port:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind((address, 0))
    listener.listen()
    return listener


def test_a_port_a_program_listens_on_is_in_use_on_any_address() -> None:
    for address in ("127.0.0.1", "0.0.0.0"):
        with _listener(address) as listener:
            port = listener.getsockname()[1]
            assert in_use(port)
        assert not in_use(port)  # closed: free again


def test_a_port_a_grpc_like_server_holds_with_so_reuseport_is_in_use() -> None:
    with _listener("0.0.0.0", reuse_port=True) as listener:  # as gRPC's servers bind: another job's task
        assert in_use(listener.getsockname()[1])
