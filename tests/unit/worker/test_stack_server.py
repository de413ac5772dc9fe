"""The stack endpoint (``launcher.worker.stack_server`` and ``launcher.protocol.stack_endpoint``): only the run's
token gets the stacks; a missing or wrong token, an oversized or a silent request get nothing and hold nothing up;
the answer is capped. (A task's agent serving py-spy's dump of its program: test_agent.py.)"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from socketserver import TCPServer

import pytest

from helpers.boards import free_port
from launcher.protocol import agent_control, stack_endpoint
from launcher.protocol.agent_control import AgentState
from launcher.protocol.endpoint_wire import MAX_REQUEST_BYTES
from launcher.protocol.stack_endpoint import Control, ask
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.worker import stack_server
from launcher.worker.stack_server import MAX_CONNECTIONS, serve_stacks

TOKEN = "0123456789abcdef0123456789abcdef"
#: How a send or shutdown fails when the endpoint has closed the connection first.
CLOSED_MIDWAY = {errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN}
#: The longest a test waits for the endpoint (never reached when it works).
PATIENCE = 30.0


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[], str]], int]]:
    """Starts an endpoint on 127.0.0.1 answering ``dump()``; returns its port. Every one is shut down after."""
    servers: list[TCPServer] = []

    def start(dump: Callable[[], str]) -> int:
        server = serve_stacks(TOKEN, 0, dump=dump, host="127.0.0.1")
        assert server is not None
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def raw(port: int, request: bytes) -> bytes:
    """What the endpoint answers to ``request`` (sent whole, then our side closed for writing); the connection
    refused midway (the endpoint closed with part of the request unread: a reset, a broken pipe, or no connection
    left to shut down, depending on when it closed) is no answer."""
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        try:
            conn.sendall(request)
            conn.shutdown(socket.SHUT_WR)
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except OSError as error:
            if error.errno not in CLOSED_MIDWAY:
                raise
    return b"".join(chunks)


def test_the_runs_token_gets_what_the_dump_gives(serve: Callable[..., int]) -> None:
    port = serve(lambda: "Thread 4242 (active+gil): \"MainThread\"\n    spin (/app/x.py:3)\n")
    dump, why = ask("127.0.0.1", port, TOKEN)
    assert why == "" and dump == "Thread 4242 (active+gil): \"MainThread\"\n    spin (/app/x.py:3)\n"


@pytest.mark.parametrize("request_", [
    b"\n",  # no token
    b"not-the-token\n",
    TOKEN[:-1].encode() + b"\n",  # a prefix of it
    TOKEN.encode() + b"x\n",
    TOKEN.encode(),  # no newline: the request never ended
    TOKEN.encode() + b" " * MAX_REQUEST_BYTES + b"\n",  # too long
    b"x" * (MAX_REQUEST_BYTES * 64),
], ids=["missing", "wrong", "prefix", "longer", "unended", "oversized", "flood"])
def test_anything_but_the_token_gets_nothing(serve: Callable[..., int], request_: bytes) -> None:
    port = serve(lambda: "Thread 1\n")
    assert raw(port, request_) == b""
    assert raw(port, stack_endpoint.request(TOKEN)) == b"Thread 1\n"  # and the endpoint still answers the run


def test_a_silent_client_is_dropped_and_holds_up_no_one(serve: Callable[..., int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_server._Request, "timeout", 0.2)
    port = serve(lambda: "Thread 1\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
        silent.settimeout(10)
        assert silent.recv(1) == b""  # closed by the endpoint, with nothing sent
        assert ask("127.0.0.1", port, TOKEN) == ("Thread 1\n", "")


def test_the_answer_is_capped(serve: Callable[..., int]) -> None:
    port = serve(lambda: "  File \"x.py\", line 1 in f\n" * (3 * MAX_STACK_BYTES // 28))
    answer = raw(port, stack_endpoint.request(TOKEN))
    assert len(answer) <= MAX_STACK_BYTES and answer.endswith(b" bytes, the first kept\n")
    dump, _ = ask("127.0.0.1", port, TOKEN)
    assert dump is not None and len(dump.encode()) <= MAX_STACK_BYTES


def test_no_token_serves_nothing_and_a_closed_port_is_one_line() -> None:
    assert serve_stacks("", free_port(), dump=lambda: "Thread 1\n", host="127.0.0.1") is None
    port = free_port()
    dump, why = ask("127.0.0.1", port, TOKEN)
    assert dump is None and why.startswith(f"its stack endpoint (127.0.0.1:{port}) did not answer") and "\n" not in why


def test_a_connection_past_max_connections_is_refused_and_served_again_once_one_ended() -> None:
    """``MAX_CONNECTIONS`` requests under way (each holding its thread in ``control``) take every slot: one more
    connection is closed unanswered, and, once they were answered, another is served."""
    entered, release = threading.Semaphore(0), threading.Event()

    def control(request: Control) -> AgentState:
        entered.release()
        release.wait(PATIENCE)
        return AgentState(run=1)

    server = serve_stacks(TOKEN, 0, dump=lambda: "Thread 1\n", host="127.0.0.1", control=control)
    assert server is not None
    port = int(server.server_address[1])
    status = (agent_control.Status(token=TOKEN).model_dump_json() + "\n").encode()
    try:
        with ThreadPoolExecutor(max_workers=MAX_CONNECTIONS) as pool:
            held = [pool.submit(raw, port, status) for _ in range(MAX_CONNECTIONS)]
            for _ in held:
                assert entered.acquire(timeout=PATIENCE)  # every slot taken, by a request under way
            assert raw(port, status) == b""  # refused: closed, nothing read
            release.set()
            assert all(AgentState.model_validate_json(done.result(PATIENCE)) == AgentState(run=1) for done in held)
        assert ask("127.0.0.1", port, TOKEN) == ("Thread 1\n", "")  # the slots are free again
    finally:
        release.set()
        server.shutdown()
        server.server_close()
