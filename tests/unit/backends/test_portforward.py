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


class ProxyStream:
    """The client's stream where a reset shows: its proxy thread (``kubernetes.stream.ws_client.PortForward._proxy``)
    writes the pod's reply into our side of a socket pair and ends when it reads our side's end; an ``OSError``
    there escapes that thread, which prints it as a traceback."""

    REPLY = 4 * 1024 * 1024  # more than the socket pair buffers: still in flight when the browser leaves

    def __init__(self) -> None:
        self.local, self.proxy = socket.socketpair()
        self.errors: list[OSError] = []
        self.thread = threading.Thread(target=self._reply, daemon=True)
        self.thread.start()

    def _reply(self) -> None:
        try:
            with self.proxy:
                self.proxy.recv(1024)
                self.proxy.sendall(b"x" * self.REPLY)
                while self.proxy.recv(1024 * 1024):
                    pass
        except OSError as exc:
            self.errors.append(exc)

    def socket(self, port: int) -> socket.socket:
        return self.local

    def close(self) -> None:
        self.local.close()


def test_a_browser_leaving_mid_reply_ends_the_stream_without_a_reset_in_the_clients_thread() -> None:
    streams: list[ProxyStream] = []

    def open_stream() -> ProxyStream:
        streams.append(ProxyStream())
        return streams[-1]

    port = free_port()
    with PortForwarder(open_stream, 6006, "127.0.0.1", port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as browser:
            browser.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert browser.recv(1024)  # the reply began; the browser leaves with the rest in flight
        streams[0].thread.join(timeout=60)
    assert not streams[0].thread.is_alive()
    assert streams[0].errors == [], "the client's proxy thread saw a reset: it prints a traceback"
