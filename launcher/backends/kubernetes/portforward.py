"""A local port forwarded to a pod's port through the API server, as ``kubectl port-forward`` does.

Contract: ``PortForwarder(open_stream, remote_port, host, port)`` listens
on ``host:port`` once entered; every accepted connection gets its own
port-forward stream from ``open_stream()`` (the Kubernetes client's
``kubernetes.stream.portforward`` on ``pods/<pod>/portforward``, a
websocket to the API server) and bytes are copied both ways until either
side closes. Leaving the context stops listening and closes every
connection before it returns: a connect right after it is refused. A
socket closed while another thread waits on it stays open in the kernel
until that wait ends, so the listener and the connections are shut down
(which wakes their threads) and the accepting thread is joined.
``running()`` is False once the listener is closed.

A connection's stream is ended by ``end_stream``: the client's proxy thread
reads its side of a socket pair, and closing ours while bytes from the pod are
still unread there resets its side, which that thread does not catch: it
printed a traceback for every browser request cut short.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from launcher.errors import LaunchError

POLL_SECONDS = 0.5
CHUNK = 64 * 1024
#: How long ``end_stream`` reads what the pod still sends before it closes anyway.
END_SECONDS = 5.0


class PortForwarder:
    def __init__(self, open_stream: Callable[[], Any], remote_port: int, host: str, port: int):
        self.open_stream = open_stream
        self.remote_port = remote_port
        self.address = (host, port)
        self._closed = threading.Event()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def __enter__(self) -> PortForwarder:
        family = socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(self.address)
        except OSError as exc:
            listener.close()
            raise LaunchError(f"cannot listen on {self.address[0]}:{self.address[1]}: {exc.strerror}") from None
        listener.listen()
        listener.settimeout(POLL_SECONDS)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, name="port-forward", daemon=True)
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        if self._listener is not None:
            _shut_down(self._listener)
            self._listener.close()
        if self._accepting is not None:
            self._accepting.join()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _shut_down(connection)

    def running(self) -> bool:
        return self._listener is not None and not self._closed.is_set()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._connections.add(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        stream = remote = None
        try:
            if self._closed.is_set():  # accepted as the forward was left: __exit__ ends it; open no stream
                return
            stream = self.open_stream()
            remote = stream.socket(self.remote_port)
            self._pump(connection, remote)
        except Exception:  # noqa: BLE001 - one failed connection must not end the forward; the client sees it closed
            pass
        finally:
            with self._lock:
                self._connections.discard(connection)
            connection.close()
            if remote is not None:
                end_stream(remote)
            if stream is not None:
                stream.close()

    def _pump(self, local: Any, remote: Any) -> None:
        remote.setblocking(True)
        peers = {local.fileno(): remote, remote.fileno(): local}
        sockets = {local.fileno(): local, remote.fileno(): remote}
        while not self._closed.is_set():
            readable, _, _ = select.select(list(sockets), [], [], POLL_SECONDS)
            for fileno in readable:
                data = sockets[fileno].recv(CHUNK)
                if not data:
                    return
                peers[fileno].sendall(data)


def end_stream(remote: socket.socket, seconds: float = END_SECONDS) -> None:
    """Ends our side of a port-forward stream so that the client's proxy thread sees its end, not a reset:
    half-close it, then discard what the pod still sends until the proxy closes its side (or ``seconds``)."""
    deadline = time.monotonic() + seconds
    with contextlib.suppress(OSError):
        remote.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            remote.settimeout(left)
            if not remote.recv(CHUNK):
                return


def _shut_down(sock: socket.socket) -> None:
    """Ends ``sock`` for every thread waiting on it (a listener stops listening); already ended is fine."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
