"""The server side of the agent's endpoint (``launcher.protocol.stack_endpoint``): a program's stacks, and the
control of its runs, served to the run's supervisor over the pod network, so no one needs ``pods/exec``. Its one
user is a Kubernetes task's agent (``launcher.worker.agent``), which answers with ``py-spy`` of its child.

Contract: ``serve_stacks(token, port, dump, control=None)`` serves, in daemon threads, each connection in a
thread of its own (a ``stop`` waits for its grace; a stacks request meanwhile is still answered), at most
``MAX_CONNECTIONS`` at once: one more is closed unanswered (refused: no thread, nothing read), so no client makes
the agent start threads without bound; a slot is free again once its answer was written. A request line
(at most ``MAX_REQUEST_BYTES``, within ``REQUEST_SECONDS``, ``launcher.protocol.agent_control``) whose token is
``token`` (``hmac.compare_digest``) is answered: the stacks request with ``dump()``, ``capped``; another with
``control(request)``'s state, where ``control`` is given. Anything else is answered with nothing. An empty token
serves nothing; a port that cannot be bound is one warning on stderr, and the program runs on. It returns the
server (``shutdown`` ends it; ``server_close`` then waits for the answers under way), or None.
"""

from __future__ import annotations

import hmac
import logging
import socketserver
import threading
from collections.abc import Callable
from typing import Any

from launcher.protocol import agent_control
from launcher.protocol.endpoint_wire import MAX_REQUEST_BYTES, REQUEST_SECONDS
from launcher.protocol.stack_endpoint import Control
from launcher.protocol.stacks_signal import capped

log = logging.getLogger(__name__)

#: The connections served at once (the supervisor's: a stop and a stacks or status request of one run, with room).
MAX_CONNECTIONS = 8


#: What answers a control request: the agent's state after it.
Controller = Callable[[Control], agent_control.AgentState]


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = False  # ``server_close`` waits for the answers under way

    def __init__(self, address: tuple[str, int], token: bytes, dump: Callable[[], str], control: Controller | None):
        self.token, self.dump, self.control = token, dump, control
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Request)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serves the connection in a thread of its own if one of the ``MAX_CONNECTIONS`` slots is free; else
        closes it unanswered."""
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread took it
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        """A request that failed (a reset, a slow client) is dropped without a word: the task's log stays its own."""


class _Request(socketserver.StreamRequestHandler):
    timeout = REQUEST_SECONDS  # each read of the request; a silent client is dropped
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        if len(line) > MAX_REQUEST_BYTES or not line.endswith(b"\n"):
            return
        request = agent_control.decode(line[:-1])
        if request is None or not hmac.compare_digest(request.token.encode(), self.server.token):
            return
        if isinstance(request, agent_control.Stacks):
            self.wfile.write(capped(self.server.dump()).encode(errors="replace"))
        elif self.server.control is not None:
            self.wfile.write(self.server.control(request).model_dump_json().encode())


def serve_stacks(token: str, port: int, dump: Callable[[], str], host: str = "",
                 control: Controller | None = None) -> socketserver.TCPServer | None:
    if not token:
        return None
    try:
        server = _Server((host, port), token.encode(), dump, control)
    except OSError as exc:
        log.warning("tfcluster: cannot serve the stacks on port %s: %s", port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="tfcluster-stacks", daemon=True).start()
    return server
