"""Addressing on Kubernetes: ``<task>.<headless service>`` resolves inside the namespace.

``KubernetesTarget.storage`` names every mount point a task's pod has besides the checkpoint claim (which is
mounted at the checkpoint dir): ``/tmp``, the cluster file's ``/etc/tfcluster``, the workspace copy at
``/workspace`` (with a workspace) and the runtime's own; ``launcher.backends.kubernetes.manifests`` mounts them.
"""

from __future__ import annotations

from launcher.backends.kubernetes.pods import CONFIG_DIR, TMP_DIR
from launcher.plan import naming
from launcher.plan.targets import RUNTIME_DIRS, RUNTIME_MOUNTS, BackendKind, Storage, Target
from launcher.plan.workspace import CONTAINER_WORKSPACE
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem


class KubernetesTarget(Target):
    """Pods of the tasks' Jobs, whose hostnames are the task names."""

    kind = BackendKind.K8S
    #: Each task's agent keeps one in its pod, for the restarts it makes there (``launcher.worker.agent``).
    keeps_standbys = True

    def address(self, spec: ClusterSpec, role: RoleType, index: int, ordinal: int) -> str:
        host = f"{naming.task_name(spec.name, role, index)}.{naming.service_name(spec.name)}"
        return f"{host}:{spec.roles.role(role).port}"

    def registry(self, spec: ClusterSpec) -> str | None:
        return spec.kubernetes.registry

    def storage(self, spec: ClusterSpec) -> Storage:
        own = {TMP_DIR: "the tasks' scratch space", CONFIG_DIR: "the cluster file"}
        if spec.workspace:
            own[CONTAINER_WORKSPACE] = "the workspace"
        return Storage(in_containers=True, mounts={**own, **RUNTIME_MOUNTS}, owned=RUNTIME_DIRS)


def target(spec: ClusterSpec, *, launching: bool = False) -> KubernetesTarget:
    return KubernetesTarget()


def registry_problems(spec: ClusterSpec) -> list[Problem]:
    """A workspace reaches the nodes only through a registry: one must be named."""
    if spec.workspace and not spec.kubernetes.registry:
        return [Problem("kubernetes.registry", "a workspace image must be pushed where the nodes pull from: "
                        "set kubernetes.registry (or --registry host[:port][/path])")]
    return []
