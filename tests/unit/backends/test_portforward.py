"""PortForwarder: bytes both ways through a stream per connection, and leaving it ends the listener and every
connection before it returns (a socket closed while another thread waits on it stays open in the kernel)."""

from __future__ import annotations

import socket
import threading

from helpers.boards import free_port
from launcher.backends.kubernetes.portforward import PortForwarder


class EchoStream:
    """The client's port-forward stream, faithful where PortForwarder uses it: ``socket(port)`` is a connected
    socket to the pod's port (here an echo), ``close()`` ends it."""

    def __init__(self) -> None:
        self.local, self.pod = socket.socketpair()
        threading.Thread(target=self._echo, daemon=True).start()

    def _echo(self) -> None:
        with self.pod:
            while data := self.pod.recv(1024):
                self.pod.sendall(data)

    def socket(self, port: int) -> socket.socket:
        assert port == 6006
        return self.local

    def close(self) -> None:
        self.local.close()


def test_bytes_go_both_ways_and_leaving_ends_an_open_connection() -> None:
    port = free_port()
    with PortForwarder(EchoStream, 6006, "127.0.0.1", port) as forward:
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.sendall(b"ping")
        assert client.recv(1024) == b"ping"
        assert forward.running()
    assert not forward.running()
    with client:
        assert client.recv(1024) == b"", "the connection outlived the forward"


def test_a_connect_right_after_leaving_is_refused() -> None:
    for _ in range(5):  # the accepting thread is waiting on the listener each time it is left
        port = free_port()
        with PortForwarder(EchoStream, 6006, "127.0.0.1", port):
            pass
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, "the forwarded port is still open"
