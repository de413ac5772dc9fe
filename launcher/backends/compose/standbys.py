"""Standby containers: a task's restart becomes a container that had imported TensorFlow beforehand.

Contract: ``create(client, task)`` starts ``<task>.standby``, a copy of the task's container (same image,
entrypoint, environment, user, mounts, limits, hardening, network and labels, as compose created it) running
``task.standby_command`` (``launcher.worker.standby --on-signal``) at the lowest CPU weight (``IDLE_CPU_SHARES``);
it carries compose's one-off label (never counted among the service's containers) and answers to its own name
only. ``call(client, task, retire)`` makes a ready standby the task: the task's ended container is renamed out of
the way and handed to ``retire``, the standby takes the task's name (Docker's DNS follows), the normal CPU weight
and ``CALL_SIGNAL``; it returns None, having removed it, for a standby that is not running or not ready.
``retire(container, root)`` appends an ended container's output to ``ended_log(root, task)`` (what ``logs``
prints before the container's own) and removes it with its anonymous volumes. ``is_task_container(name)``:
False for standbys and retired containers. A container of another owner that has a standby's name is never
touched. Why: docs/architecture.md (Decisions).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Task
from launcher.protocol.standby import CALL_SIGNAL, READY_LINE
from launcher.supervision.statefile import open_private, private_dir

STANDBY_SUFFIX = ".standby"
ENDED_INFIX = ".ended-"
#: Docker's CPU shares while a standby waits (the minimum) and once it is the task (Docker's default weight).
IDLE_CPU_SHARES = 2
NORMAL_CPU_SHARES = 1024
ONEOFF_LABEL = "com.docker.compose.oneoff"
ENDED_LOG_DIR = "ended"


def standby_name(task_name: str) -> str:
    return task_name + STANDBY_SUFFIX


def is_task_container(name: str) -> bool:
    return not (name.endswith(STANDBY_SUFFIX) or ENDED_INFIX in name)


def ended_log(root: Path, task_name: str) -> Path:
    """The output of the task's containers that restarts replaced, oldest first."""
    return root / ENDED_LOG_DIR / f"{task_name}.log"


def find(client: Any, name: str) -> Any | None:
    import docker.errors

    try:
        return client.containers.get(name)
    except docker.errors.NotFound:
        return None


def ours(container: Any, task_name: str) -> bool:
    """True if ``container`` is one tfcluster made for the task (a container of another owner is never touched)."""
    return bool(container.labels.get(naming.LABEL_TASK) == task_name)


def create(client: Any, task: Task) -> None:
    """Start the task's standby as a copy of its container (see the module contract); one left over is replaced.

    Raises ``LaunchError`` when a container of another owner has the standby's name.
    """
    left = find(client, standby_name(task.name))
    if left is not None:
        if not ours(left, task.name):
            raise LaunchError(f"a container named {left.name} exists and is not tfcluster's: {task.name} has no standby")
        if left.status == "running":
            return
        left.remove(force=True, v=True)
    original = client.api.inspect_container(task.name)
    config = {
        **original["Config"],
        "Cmd": list(task.standby_command),
        "Labels": {**original["Config"]["Labels"], ONEOFF_LABEL: "True"},
        "HostConfig": {**original["HostConfig"], "CpuShares": IDLE_CPU_SHARES},
        "NetworkingConfig": {"EndpointsConfig": {net: {} for net in original["NetworkSettings"]["Networks"]}},
    }
    created = client.api.create_container_from_config(config, standby_name(task.name))
    client.api.start(created["Id"])


def call(client: Any, task: Task, retire: Callable[[Any], None]) -> Any | None:
    """The task's ready standby, made the task (see the module contract); None when there is none."""
    standby = find(client, standby_name(task.name))
    if standby is None or not ours(standby, task.name):
        return None
    if standby.status != "running" or READY_LINE.encode() not in standby.logs(stdout=True, stderr=False):
        standby.remove(force=True, v=True)
        return None
    ended = find(client, task.name)
    if ended is not None:
        ended.rename(f"{task.name}{ENDED_INFIX}{time.time_ns()}")
        ended.reload()  # the SDK's object keeps the old name until it reads the container again
        retire(ended)
    standby.rename(task.name)
    standby.update(cpu_shares=NORMAL_CPU_SHARES)
    standby.kill(signal=CALL_SIGNAL.name)
    standby.reload()
    return standby


def remove(client: Any, task_name: str) -> None:
    """Remove the task's standby, if any."""
    standby = find(client, standby_name(task_name))
    if standby is not None and ours(standby, task_name):
        standby.remove(force=True, v=True)


def retire(container: Any, root: Path) -> None:
    task_name = container.name.partition(ENDED_INFIX)[0]
    private_dir(root / ENDED_LOG_DIR)
    with open_private(ended_log(root, task_name)) as log:
        for chunk in container.logs(stdout=True, stderr=True, stream=True, follow=False):  # never all at once
            log.write(chunk)
    container.remove(force=True, v=True)
