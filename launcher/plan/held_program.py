"""A container task's program under its agent (``launcher.worker.agent``): what Kubernetes and Compose both run.

Contract: ``container_program(plan, task)`` is a task container's command: ``held_program``'s where there is one,
else the task's command. ``held_program(plan, task)`` is the container's command that runs ``task.command`` under its agent, with
the task's standby (``agent_control.STANDBY_OPTION``: called by a line on its stdin, ``called_by_line``) and, for a
standby of the entrypoint, the zygote that forks it (``agent_control.ZYGOTE_OPTION``, ``targets.zygote_command``),
where the agent can run: the command follows the image's ENTRYPOINT (tini stays in front) and the image holds
tfcluster (the task runs the entrypoint, or its image is the worker image or a workspace layer on it). None where it
cannot: the command alone runs (a restart is a new container or pod, and its stacks are read otherwise). The agent
restarts the program in place only where its environment has ``STACKS_PORT`` and the run's token
(``launcher.protocol.endpoint_wire``); without them it ends with its one run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from launcher.plan.images import image_for, is_worker_image
from launcher.plan.planner import Plan, Task
from launcher.plan.targets import AGENT_MODULE, CONTAINER_PYTHON, zygote_command
from launcher.protocol import agent_control
from launcher.protocol.standby import ON_SIGNAL


def container_program(plan: Plan, task: Task) -> list[str]:
    return held_program(plan, task) or task.command


def held_program(plan: Plan, task: Task) -> list[str] | None:
    image = image_for(plan.spec, plan.spec.roles.role(task.type))
    if not task.command or task.replaces_entrypoint or not (task.runs_entrypoint or is_worker_image(image)):
        return None
    called = called_by_line(task.standby_command)
    standby = [agent_control.STANDBY_OPTION, json.dumps(called)] if called else []
    if standby and (zygote := zygote_command(called)) is not None:
        standby += [agent_control.ZYGOTE_OPTION, json.dumps(zygote)]
    return [CONTAINER_PYTHON, "-m", AGENT_MODULE, *standby, "--", *task.command]


def called_by_line(standby_command: Sequence[str]) -> list[str]:
    """The task's standby as its agent calls it, by a line on its stdin: without ``ON_SIGNAL`` (by which the
    backend's standby containers are called)."""
    return [arg for i, arg in enumerate(standby_command) if not (i == 3 and arg == ON_SIGNAL)]
