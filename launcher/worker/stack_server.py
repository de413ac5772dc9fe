"""The server side of the agent's endpoint (``launcher.protocol.stack_endpoint``): a program's stacks, and the
control of its runs, served to the run's supervisor over the pod network, so no one needs ``pods/exec``. Its one
user is a Kubernetes task's agent (``launcher.worker.agent``), which answers with ``py-spy`` of its child.

Contract: ``serve_stacks(token, port, dump, control=None)`` serves, in daemon threads, each connection in a
thread of its own (a ``stop`` waits for its grace; a stacks request meanwhile is still answered): a request line
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

from launcher.protocol import agent_control
from launcher.protocol.stack_endpoint import MAX_REQUEST_BYTES, REQUEST_SECONDS, Control
from launcher.protocol.stacks_signal import capped

log = logging.getLogger(__name__)


#: What answers a control request: the agent's state after it.
Controller = Callable[[Control], agent_control.AgentState]


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = False  # ``server_close`` waits for the answers under way

    def __init__(self, address: tuple[str, int], token: bytes, dump: Callable[[], str], control: Controller | None):
        self.token, self.dump, self.control = token, dump, control
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
