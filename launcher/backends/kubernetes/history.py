"""A Kubernetes run's history for ``tfcluster report`` (``Backend.history``): its plan, status and tasks' events.

Contract: ``read`` plans the run again from what its ConfigMap keeps (``cluster_state.plan_of``), so the page
shows the planned tasks and the spec (env names only; a workspace's image names are the spec's, not the built ones). Each task's events come from
the logs of its pods still there, oldest first (the Job controller keeps a failed pod until the Job goes); a
pod already removed (its Job replaced by a restart, evicted, garbage-collected) left no log, so its run is
missing from the page. ``LaunchError`` for a run launched before its ConfigMap kept the spec.
"""

from __future__ import annotations

from collections.abc import Iterator

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.cluster_state import plan_of
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.supervision.history import RunHistory
from launcher.supervision.status import JobStatus


def task_lines(api: KubeApi, name: str, namespace: str, task: str) -> Iterator[str]:
    """The log lines of every pod of ``task`` still there, oldest first; one that cannot be read is skipped."""
    for (role, index), views in k8s_status.runs_by_task(apply.of_cluster(api, Kind.POD, namespace, name)).items():
        if naming.task_name(name, role, index) != task:
            continue
        for view in views:
            try:
                yield from list(api.log_lines(view.name, namespace, CONTAINER, follow=False))
            except LaunchError:
                continue  # not started yet, or its node is gone


def read(api: KubeApi, name: str, namespace: str, status: JobStatus) -> RunHistory:
    """The run's history for ``report`` (``status``: its ``describe``)."""
    return RunHistory.read(plan_of(api, name, namespace), status.to_dict(),
                           lambda task: task_lines(api, name, namespace, task))
