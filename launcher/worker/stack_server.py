"""The server side of the stack endpoint (``launcher.protocol.stack_endpoint``): a program's stacks, served to the
run's supervisor over the pod network, so no one needs ``pods/exec`` to read them. Its one user is a Kubernetes
task's agent (``launcher.worker.agent``), which answers with ``py-spy`` of its child.

Contract: ``serve_stacks(token, port, dump)`` serves, in a daemon thread, one connection at a time: a request line
(at most ``MAX_REQUEST_BYTES``, within ``REQUEST_SECONDS``) equal to ``token`` (``hmac.compare_digest``) is
answered with ``dump()``, ``capped``; anything else is answered with nothing. An empty token serves nothing; a
port that cannot be bound is one warning on stderr, and the program runs on. It returns the server
(``shutdown`` ends it), or None.
"""

from __future__ import annotations

import hmac
import logging
import socketserver
import threading
from collections.abc import Callable

from launcher.protocol.stack_endpoint import MAX_REQUEST_BYTES, REQUEST_SECONDS
from launcher.protocol.stacks_signal import capped

log = logging.getLogger(__name__)


class _Server(socketserver.TCPServer):
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], token: bytes, dump: Callable[[], str]):
        self.token, self.dump = token, dump
        super().__init__(address, _Request)

    def handle_error(self, request: object, client_address: object) -> None:
        """A request that failed (a reset, a slow client) is dropped without a word: the task's log stays its own."""


class _Request(socketserver.StreamRequestHandler):
    timeout = REQUEST_SECONDS  # each read of the request; a silent client is dropped
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        if len(line) > MAX_REQUEST_BYTES or not line.endswith(b"\n"):
            return
        if hmac.compare_digest(line[:-1], self.server.token):
            self.wfile.write(capped(self.server.dump()).encode(errors="replace"))


def serve_stacks(token: str, port: int, dump: Callable[[], str], host: str = "") -> socketserver.TCPServer | None:
    if not token:
        return None
    try:
        server = _Server((host, port), token.encode(), dump)
    except OSError as exc:
        log.warning("tfcluster: cannot serve the stacks on port %s: %s", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="tfcluster-stacks", daemon=True).start()
    return server
