"""The agent's endpoint on the wire, with the standard library only: what ``launcher.protocol.stack_endpoint`` and
``launcher.worker.agent_relay`` (run by ``docker exec`` at every restart: no pydantic to import) both send and wait.

Contract: a task serves its agent's endpoint on the TCP port its ``STACKS_PORT`` names (``PORT`` as the backends
give it), at the address its ``STACKS_HOST`` names (every one without it); a request is one line of at most
``MAX_REQUEST_BYTES``, which the agent waits ``REQUEST_SECONDS`` for; ``answer_seconds(grace)`` is how long the
answer is waited for; ``connected(host, port)`` opens a connection within ``REQUEST_SECONDS``, or says why not in
one line; ``answer_to(conn, line, seconds)`` sends ``line`` and reads the answer to its end (the agent closes the
connection), at most ``MAX_STACK_BYTES`` and then some, each read within ``seconds``; it raises ``OSError``.
"""

from __future__ import annotations

import socket

from launcher.protocol.stacks_signal import MAX_STACK_BYTES

#: The variable that names the port (the task serves nothing without it).
STACKS_PORT = "TFCLUSTER_STACKS_PORT"
#: The variable that names the address the task listens on (unset: every address of its network namespace, as a
#: pod's must for its supervisor; Compose's tasks: the loopback, which only ``docker exec`` in the container reaches).
STACKS_HOST = "TFCLUSTER_STACKS_HOST"
#: The loopback address, where a compose task listens and its relay (``launcher.worker.agent_relay``) asks.
LOOPBACK = "127.0.0.1"
#: The port every task serves its stacks on (its own network namespace: one per pod or container, no clash).
PORT = 9478
#: The longest request: its JSON line, a token (32 hex digits) and a newline, with room to spare.
MAX_REQUEST_BYTES = 256
#: How long a task waits for a request's line, and a supervisor for the answer, before giving up.
REQUEST_SECONDS = 5.0
#: How long a supervisor waits for the whole answer (a dump of many threads takes milliseconds).
ANSWER_SECONDS = 10.0


def answer_seconds(grace_seconds: float = 0.0) -> float:
    """How long an asker waits for the agent's answer: ``ANSWER_SECONDS``, a stop's grace on top (the agent answers a
    stop once the run ended, SIGKILLed after that grace)."""
    return ANSWER_SECONDS + grace_seconds


def connected(host: str, port: int) -> tuple[socket.socket | None, str]:
    try:
        return socket.create_connection((host, port), timeout=REQUEST_SECONDS), ""
    except OSError as exc:
        return None, f"its stack endpoint ({host}:{port}) did not answer: {exc.strerror or exc}"


def answer_to(conn: socket.socket, line: bytes, seconds: float) -> bytes:
    conn.settimeout(seconds)
    conn.sendall(line)
    chunks, size = [], 0
    while size <= MAX_STACK_BYTES and (chunk := conn.recv(65536)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
