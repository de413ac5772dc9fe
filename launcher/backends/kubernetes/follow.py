"""``logs -f`` on Kubernetes: a task's log across its runs, as the local backend follows a task's log file.

Contract: ``follow_task(api, name, task, namespace, over)`` yields the task container's log of the task's newest
pod (once its container started: a pod still pending is read again until it starts or goes), then of each newer
pod of the task (the supervisor's restarts), in order, and returns once ``over()`` says the run has ended (or is
gone) and no pod of the task is left to follow. Runs older than the newest pod at the call are not repeated
(``logs`` without ``-f`` shows the newest run of each task too).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial

from launcher.backends.kubernetes import apply, pod_io
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi

#: Pause between listings of a task's pods while none is left to follow and the run goes on.
POLL_SECONDS = 1.0


def follow_task(api: KubeApi, name: str, task: str, namespace: str, over: Callable[[], bool],
                pause: Callable[[float], None] = time.sleep) -> Iterator[str]:
    def wait(seconds: float) -> bool:
        pause(seconds)
        return over()

    followed: set[str] | None = None
    while True:
        views = k8s_status.oldest_first(apply.of_cluster(api, Kind.POD, namespace, name, task))
        if followed is None:
            followed = {view.name for view in views[:-1]}
        fresh = [view.name for view in views if view.name not in followed]
        if fresh:
            followed.add(fresh[0])
            yield from pod_io.followed_once_started(
                api, fresh[0], namespace, partial(api.read_if_exists, Kind.POD, fresh[0], namespace), wait)
            continue
        if over():
            return
        pause(POLL_SECONDS)
