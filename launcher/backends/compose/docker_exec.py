"""``docker exec`` in a task's container: its stacks read with the image's py-spy, and its agent asked.

Contract: ``read_stacks_in(container)`` reads the stacks of every process of the running ``container`` with the
image's py-spy (``launcher.backends.pyspy.read_container_stacks``), each command run by ``docker exec`` as the
container's own user (the task's uid) with py-spy's environment. ``ask_agent(container, request)`` gives the
request to the container's agent (``launcher.worker.agent``) through ``launcher.worker.agent_relay``, run by
``docker exec`` likewise (the token stays in the container's environment, never on a command line):
``(answer, "")``, the agent's answer as the relay wrote it (``launcher.protocol.stack_endpoint`` reads it), or
``(None, why)`` in one line. An API error is one line, never raised.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from launcher.backends.pyspy import Ran, read_container_stacks
from launcher.plan.targets import AGENT_RELAY_MODULE, CONTAINER_PYTHON
from launcher.protocol import agent_control
from launcher.protocol.pyspy_command import PYSPY_ENV
from launcher.protocol.stack_endpoint import Control


def read_stacks_in(container: Any) -> tuple[str | None, str]:
    return read_container_stacks(partial(_exec, container, environment=PYSPY_ENV))


def ask_agent(container: Any, request: agent_control.Stacks | Control) -> tuple[bytes | None, str]:
    """The agent's answer to ``request``, as its relay wrote it (see the module contract)."""
    ran = _exec(container, [CONTAINER_PYTHON, "-m", AGENT_RELAY_MODULE, request.model_dump_json(exclude={"token"})])
    if isinstance(ran, str):
        return None, ran
    if ran.returncode != 0:
        said = ran.stderr.strip().splitlines()
        return None, said[-1] if said else f"its agent's relay ended with {ran.returncode}"
    return ran.stdout.encode(), ""


def _exec(container: Any, command: list[str], environment: dict[str, str] | None = None) -> Ran | str:
    import docker.errors

    try:
        code, (out, err) = container.exec_run(command, environment=environment, demux=True)
    except docker.errors.APIError as exc:
        return f"docker exec failed: {exc.explanation or exc}"
    return Ran(code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace"))
