"""A Unix-socket proxy that can be cut: put it in front of the Docker engine to break its connections on purpose.

``SocketProxy(upstream)`` listens on a fresh socket path and relays every
connection to ``upstream`` byte for byte; ``cut()`` closes the listener and
every relayed connection, as an engine that died (or a broken connection to
it) would look to the client; ``restore()`` listens again at the same path,
as the engine back after a restart. ``drop(request, skip, times)`` breaks
single requests instead: of the requests matching the ``request`` pattern
(bytes, searched in what the client sends), it lets ``skip`` through, then
closes the connection of the next ``times`` before the engine sees them, as
an engine connection that broke mid-request looks to the client
(``Connection aborted``); ``dropped`` counts those it broke.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import threading
from pathlib import Path


class SocketProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.path = Path(tempfile.mkdtemp()) / "engine.sock"
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = threading.Event()
        self._drop: tuple[re.Pattern[bytes], int, int] | None = None
        self.dropped = 0
        self.restore()

    def restore(self) -> None:
        self._cut.clear()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def drop(self, request: bytes, skip: int = 0, times: int = 1) -> None:
        with self._lock:
            self._drop = (re.compile(request), skip, times)

    def _drops(self, chunk: bytes) -> bool:
        """True if the client's ``chunk`` starts a request to break now (see ``drop``)."""
        with self._lock:
            if self._drop is None or not self._drop[0].search(chunk):
                return False
            pattern, skip, times = self._drop
            if skip:
                self._drop = (pattern, skip - 1, times)
                return False
            self._drop = (pattern, 0, times - 1) if times > 1 else None
            self.dropped += 1
            return True

    def cut(self) -> None:
        self._cut.set()
        self._listener.close()
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open = []
        os.unlink(self.path)

    def _accept(self) -> None:
        while not self._cut.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self.upstream)
            with self._lock:
                self._open += [client, server]
            for source, sink, checked in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._relay, args=(source, sink, checked), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket, checked: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if checked and self._drops(chunk):
                    break  # the request never reaches the engine; both ends are closed below
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
