"""Reading a task's pod through the API: its log, a command run in it (``pods/exec``), its stacks (py-spy).

Contract: every function reads the task container (``CONTAINER``); ``read_stacks`` reads each running task's
program with the image's py-spy, for ``tfcluster debug`` and the supervisor's stall watchdog alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.backends.pyspy import PYSPY_ENV, PYSPY_SECONDS, Ran, read_container_stacks, say_none
from launcher.plan import naming
from launcher.spec.models import RoleType

#: How much longer than py-spy's own bound an exec in a pod may take (the API server, the kubelet, the websocket).
EXEC_SLACK_SECONDS = 20


def log_lines(api: KubeApi, pod: str, namespace: str, follow: bool, tail: int | None = None) -> Iterator[str]:
    """The task container's log lines of ``pod`` (``LaunchError`` if the log cannot be opened)."""
    return api.log_lines(pod, namespace, CONTAINER, follow=follow, tail=tail)


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
