"""The task's side of the stack endpoint (``launcher.protocol.stack_endpoint``): its program's stacks, served to
the run's supervisor over the pod network, so no one needs ``pods/exec`` to read them.

Contract: ``serve_stacks(token, port)`` serves, in a daemon thread, one connection at a time: a request line
(at most ``MAX_REQUEST_BYTES``, within ``REQUEST_SECONDS``) equal to ``token`` (``hmac.compare_digest``) is
answered with ``dump()`` (default ``own_stacks``: every thread's Python stack, ``faulthandler``'s format),
``capped``; anything else is answered with nothing. An empty token serves nothing; a port that cannot be bound
is one warning on stderr, and the program runs on. It returns the server (``shutdown`` ends it), or None.
"""

from __future__ import annotations

import faulthandler
import hmac
import logging
import socketserver
import tempfile
import threading
from collections.abc import Callable

from launcher.protocol.stack_endpoint import MAX_REQUEST_BYTES, REQUEST_SECONDS
from launcher.protocol.stacks_signal import MAX_STACK_BYTES, capped

log = logging.getLogger(__name__)


def own_stacks() -> str:
    """Every thread's Python stack in this process, as ``faulthandler`` writes them on ``STACKS_SIGNAL``."""
    with tempfile.TemporaryFile() as out:  # faulthandler writes to a file descriptor
        faulthandler.dump_traceback(file=out, all_threads=True)
        out.seek(0)
        return out.read(MAX_STACK_BYTES + 1).decode(errors="replace")


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


def serve_stacks(token: str, port: int, dump: Callable[[], str] = own_stacks,
                 host: str = "") -> socketserver.TCPServer | None:
    if not token:
        return None
    try:
        server = _Server((host, port), token.encode(), dump)
    except OSError as exc:
        log.warning("tfcluster: cannot serve the stacks on port %s: %s", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="tfcluster-stacks", daemon=True).start()
    return server
