"""The agent's endpoint: how a supervisor reads a task's stacks, and controls its runs, over the pod network, with
no ``pods/exec``.

Contract: a task whose environment has ``STACKS_PORT`` (Kubernetes pods: ``manifests``) and the run's event
token serves on that TCP port (its agent, ``launcher.worker.agent``, the program's parent, with
``launcher.worker.stack_server``). A request is one line (``launcher.protocol.agent_control``: the run's token
and what is asked), at most ``MAX_REQUEST_BYTES``, sent within ``REQUEST_SECONDS``; the stacks request is answered
with the stacks of every thread of the program (``py-spy dump``'s format, ``capped``), the others with the agent's
state; then the connection closes. A request without the right token, too long or too slow gets no answer: the
connection closes with nothing sent. ``ask(host, port, token)`` is the stacks client on the pod network,
``exchange(conn, token, where)`` the same on a connection opened otherwise (a port-forward): ``(stacks, "")``, or
``(None, why)`` in one line; ``command``/``order`` likewise for the other requests: ``(state, "")`` or
``(None, why)``. None of them raises.
"""

from __future__ import annotations

import socket

from launcher.protocol import agent_control
from launcher.protocol.endpoint_wire import ANSWER_SECONDS, answer_seconds, answer_to, connected
from launcher.protocol.stacks_signal import capped

Control = agent_control.Status | agent_control.Stop | agent_control.Start | agent_control.Quit


def request(token: str) -> bytes:
    """The stacks request's line."""
    return agent_control.encode(agent_control.Stacks(token=token))


def exchange(conn: socket.socket, token: str, where: str, seconds: float = ANSWER_SECONDS) -> tuple[str | None, str]:
    """The stacks request sent on the connected ``conn`` and its answer: ``(stacks, "")``, or ``(None, why)``
    naming ``where`` it asked."""
    try:
        answer = answer_to(conn, request(token), seconds)
    except OSError as exc:
        return None, f"its stack endpoint ({where}) did not answer: {exc.strerror or exc}"
    return stacks_of(answer, where)


def stacks_of(answer: bytes, where: str) -> tuple[str | None, str]:
    """The stacks an endpoint answered (``capped``), or ``(None, why)`` for an empty answer."""
    text = answer.decode(errors="replace")
    if not text.strip():
        return None, f"its stack endpoint ({where}) gave nothing (no Python program py-spy could read, or not this run's token)"
    return capped(text), ""


def command(conn: socket.socket, control: Control, where: str) -> tuple[agent_control.AgentState | None, str]:
    """``control`` sent on the connected ``conn``: the agent's state, or ``(None, why)`` naming ``where``. A stop is
    given its grace on top of the usual wait."""
    seconds = answer_seconds(control.grace_seconds if isinstance(control, agent_control.Stop) else 0.0)
    try:
        answer = answer_to(conn, agent_control.encode(control), seconds)
    except OSError as exc:
        return None, f"its agent ({where}) did not answer {control.kind.value}: {exc.strerror or exc}"
    return state_of_answer(answer, control, where)


def state_of_answer(answer: bytes, control: Control, where: str) -> tuple[agent_control.AgentState | None, str]:
    """The agent's state in its answer to ``control``, or ``(None, why)``."""
    state = agent_control.state_of(answer)
    if state is None:
        return None, f"its agent ({where}) gave no state for {control.kind.value} (not this run's token, or no agent)"
    return state, ""


def ask(host: str, port: int, token: str, seconds: float = ANSWER_SECONDS) -> tuple[str | None, str]:
    """``exchange`` with the endpoint at ``host:port`` (the pod network: a supervisor in the cluster)."""
    conn, why = connected(host, port)
    if conn is None:
        return None, why
    with conn:
        return exchange(conn, token, f"{host}:{port}", seconds)


def order(host: str, port: int, control: Control) -> tuple[agent_control.AgentState | None, str]:
    """``command`` to the agent at ``host:port`` (the pod network)."""
    conn, why = connected(host, port)
    if conn is None:
        return None, why
    with conn:
        return command(conn, control, f"{host}:{port}")
