"""Reading a task's pod through the API: its log, a command run in it (``pods/exec``), its stacks.

Contract: every function reads the task container (``CONTAINER``); ``followed_once_started`` follows a pod's log
once its container started (the supervisor's output, ``logs -f``); ``read_stacks`` reads each running task's
program with the image's py-spy, for ``tfcluster debug`` (the user's own rights); ``forwarded_stacks`` asks a
pod's stack endpoint through a port-forward (``pods/portforward``), for a supervisor outside the cluster (the
user's own rights: the in-cluster supervisor asks the pod's IP, and has neither right); ``forwarded_order`` gives
the pod's agent a control request (``launcher.protocol.agent_control``) the same way.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from functools import partial
from typing import TypeVar

from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import KubeApi, Obj
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.backends.kubernetes.portforward import end_stream
from launcher.backends.pyspy import Ran, read_container_stacks, say_none
from launcher.plan import naming
from launcher.protocol import agent_control, stack_endpoint
from launcher.protocol.pyspy_command import PYSPY_ENV, PYSPY_SECONDS
from launcher.spec.models import RoleType

T = TypeVar("T")

#: Pause between reads of a pod whose container has not started (its log cannot be opened yet).
FOLLOW_RETRY_SECONDS = 0.5
#: How much longer than py-spy's own bound an exec in a pod may take (the API server, the kubelet, the websocket).
EXEC_SLACK_SECONDS = 20


def log_lines(api: KubeApi, pod: str, namespace: str, follow: bool, tail: int | None = None) -> Iterator[str]:
    """The task container's log lines of ``pod`` (``LaunchError`` if the log cannot be opened)."""
    return api.log_lines(pod, namespace, CONTAINER, follow=follow, tail=tail)


def started(pod: Obj) -> bool:
    """Whether the pod's task container has started (it runs, or it ended): its log can be opened."""
    state = k8s_status.PodView(pod).container().get("state") or {}
    return "running" in state or "terminated" in state


def followed_once_started(api: KubeApi, pod: str, namespace: str, read_pod: Callable[[], Obj | None],
                          wait: Callable[[float], bool]) -> Iterator[str]:
    """``pod``'s log followed to its end once its container started, ``read_pod`` read every
    ``FOLLOW_RETRY_SECONDS`` until then (``wait`` pauses, and says True to give up); nothing if the pod goes first."""
    while (current := read_pod()) is not None:
        if started(current):
            yield from log_lines(api, pod, namespace, follow=True)
            return
        if wait(FOLLOW_RETRY_SECONDS):
            return


def exec_in_task(api: KubeApi, pod: str, namespace: str, command: list[str]) -> Ran | str:
    """``command`` run in the pod's task container (``pods/exec``), with py-spy's environment."""
    return api.exec(pod, namespace, CONTAINER, ["env", *(f"{k}={v}" for k, v in PYSPY_ENV.items()), *command],
                    timeout=PYSPY_SECONDS + EXEC_SLACK_SECONDS)


def stacks_of(api: KubeApi, pod: str, namespace: str, task: str) -> str | None:
    """The stacks of the program in ``pod`` read with py-spy, or None (one line on stderr why)."""
    dump, why = read_container_stacks(partial(exec_in_task, api, pod, namespace))
    if dump is None:
        say_none(task, why)
    return dump


def read_stacks(api: KubeApi, name: str, runs: dict[tuple[RoleType, int], list[k8s_status.PodView]],
                namespace: str) -> dict[str, str | None]:
    """``{task: dump, None if it gave none}`` of each task whose latest pod runs."""
    dumps: dict[str, str | None] = {}
    for (role, index), views in sorted(runs.items(), key=lambda item: (item[0][0].order, item[0][1])):
        if views[-1].phase != "Running" or views[-1].deleting:
            continue
        task = naming.task_name(name, role, index)
        dumps[task] = stacks_of(api, views[-1].name, namespace, task)
    return dumps


def forwarded(api: KubeApi, pod: str, namespace: str, port: int,
              talk: Callable[[socket.socket, str], tuple[T | None, str]]) -> tuple[T | None, str]:
    """``talk(connection, where)`` with ``pod``'s agent endpoint on ``port`` through a port-forward stream (the
    stack endpoint's ``exchange`` or ``command``): its answer, or ``(None, why)``."""
    where = f"pod {pod} port {port}, forwarded"
    try:
        forward = api.open_forward(pod, namespace, port)
        remote = forward.socket(port)
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds; one line says why
        return None, f"its stack endpoint ({where}) cannot be reached: {str(exc).splitlines()[0] if str(exc) else exc!r}"
    try:
        remote.setblocking(True)
        return talk(remote, where)
    finally:
        end_stream(remote)
        forward.close()


def forwarded_stacks(api: KubeApi, pod: str, namespace: str, port: int, token: str) -> tuple[str | None, str]:
    """``stack_endpoint.exchange`` with ``pod``'s endpoint on ``port`` through a port-forward stream."""
    return forwarded(api, pod, namespace, port, lambda conn, where: stack_endpoint.exchange(conn, token, where))


def forwarded_order(api: KubeApi, pod: str, namespace: str, port: int,
                    control: stack_endpoint.Control) -> tuple[agent_control.AgentState | None, str]:
    """``stack_endpoint.command`` to ``pod``'s agent on ``port`` through a port-forward stream."""
    return forwarded(api, pod, namespace, port, lambda conn, where: stack_endpoint.command(conn, control, where))
