"""The stack endpoint: how a supervisor reads a task's stacks over the pod network, with no ``pods/exec``.

Contract: a task whose environment has ``STACKS_PORT`` (Kubernetes pods: ``manifests``) and the run's event
token serves its program's stacks on that TCP port (its agent, ``launcher.worker.agent``, the program's parent,
with ``launcher.worker.stack_server``). The one request is the run's token and a newline, at most
``MAX_REQUEST_BYTES``, sent within ``REQUEST_SECONDS``; the answer is the stacks of every thread of the program
(``py-spy dump``'s format, ``capped``), then the connection closes. A request without the right token, too
long or too slow gets no answer: the connection closes with nothing sent. ``ask(host, port, token)`` is the
client on the pod network, ``exchange(conn, token, where)`` the same on a connection opened otherwise (a
port-forward): ``(stacks, "")``, or ``(None, why)`` in one line; neither raises.
"""

from __future__ import annotations

import socket

from launcher.protocol.stacks_signal import MAX_STACK_BYTES, capped

#: The variable that names the port (the task serves nothing without it).
STACKS_PORT = "TFCLUSTER_STACKS_PORT"
#: The port every task pod serves its stacks on (its own network namespace: one per pod, no clash).
PORT = 9478
#: The longest request: a token (32 hex digits) and a newline, with room to spare.
MAX_REQUEST_BYTES = 256
#: How long a task waits for a request's line, and a supervisor for the answer, before giving up.
REQUEST_SECONDS = 5.0
#: How long a supervisor waits for the whole answer (a dump of many threads takes milliseconds).
ANSWER_SECONDS = 10.0


def request(token: str) -> bytes:
    return token.encode() + b"\n"


def exchange(conn: socket.socket, token: str, where: str, seconds: float = ANSWER_SECONDS) -> tuple[str | None, str]:
    """The request sent on the connected ``conn`` and its answer read to its end (at most ``MAX_STACK_BYTES``):
    ``(stacks, "")``, or ``(None, why)`` naming ``where`` it asked."""
    try:
        conn.settimeout(seconds)
        conn.sendall(request(token))
        chunks, size = [], 0
        while size <= MAX_STACK_BYTES and (chunk := conn.recv(65536)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, f"its stack endpoint ({where}) did not answer: {exc.strerror or exc}"
    text = b"".join(chunks).decode(errors="replace")
    if not text.strip():
        return None, f"its stack endpoint ({where}) gave nothing (no Python program py-spy could read, or not this run's token)"
    return capped(text), ""


def ask(host: str, port: int, token: str, seconds: float = ANSWER_SECONDS) -> tuple[str | None, str]:
    """``exchange`` with the endpoint at ``host:port`` (the pod network: a supervisor in the cluster)."""
    where = f"{host}:{port}"
    try:
        conn = socket.create_connection((host, port), timeout=REQUEST_SECONDS)
    except OSError as exc:
        return None, f"its stack endpoint ({where}) did not answer: {exc.strerror or exc}"
    with conn:
        return exchange(conn, token, where, seconds)
