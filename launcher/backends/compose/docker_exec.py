"""``docker exec`` in a task's container, for ``launcher.backends.pyspy.read_container_stacks``.

Contract: ``read_stacks_in(container)`` reads the stacks of every process of
the running ``container`` with the image's py-spy, each command run by
``docker exec`` as the container's own user (the task's uid) with py-spy's
environment; an API error is one line, never raised.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from launcher.backends.pyspy import Ran, read_container_stacks
from launcher.protocol.pyspy_command import PYSPY_ENV


def read_stacks_in(container: Any) -> tuple[str | None, str]:
    return read_container_stacks(partial(_exec, container))


def _exec(container: Any, command: list[str]) -> Ran | str:
    import docker.errors

    try:
        code, (out, err) = container.exec_run(command, environment=PYSPY_ENV, demux=True)
    except docker.errors.APIError as exc:
        return f"docker exec failed: {exc.explanation or exc}"
    return Ran(code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace"))
