"""The objects of a run's in-cluster supervisor (``kubernetes.supervisor``, the default). Pure.

Contract: ``objects(plan, program)`` is empty when the spec opts out, else a ServiceAccount, a Role,
its RoleBinding and a Job, each named ``<name>-supervisor``. The Role grants exactly the requests the
supervisor makes (``role_rules``), on the run's own Jobs and ConfigMap by name where Kubernetes allows it
(pods are named by their Jobs, so pods are granted in the namespace). The Job runs ``program`` (the one
supervisor process on the run's ConfigMap, ``KubernetesBackend.render``) in the cluster's image (``image``,
default the worker image), which must hold tfcluster; Kubernetes replaces a supervisor that died or was
deleted, and never runs two at once (``podReplacementPolicy: Failed``); a supervisor that left on SIGTERM
(exit ``ExitCode.PREEMPTED``: its pod deleted, its node drained) or whose pod was disrupted (``DisruptionTarget``)
is replaced without counting against ``BACKOFF_LIMIT`` (``POD_FAILURE_POLICY``). Its pod runs non-root under the
``restricted`` Pod Security Standard, as ``SUPERVISOR_UID`` (not the tasks' uid), with stated requests and limits
(``RESOURCES``); its token is the only one a run's pod mounts. Every object carries ``naming.LABEL_SUPERVISOR``; the Job and pod carry
``naming.supervisor_labels``, not the cluster label: they are not among the tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launcher.backends.kubernetes import gang
from launcher.backends.kubernetes.pods import TMP_DIR, TMP_VOLUME, container_security, priority, supervisor_placement
from launcher.plan import naming
from launcher.plan.images import ImageVariant
from launcher.plan.planner import Plan
from launcher.protocol.exitcodes import ExitCode
from launcher.spec.image_reference import pull_policy

Manifest = dict[str, Any]

#: Its pod's one container.
CONTAINER = "supervisor"
#: Its container's requests and limits for a run of up to ``SIZED_FROM_TASKS`` tasks: one Python process watching
#: the run's objects and following each task's log.
RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "384Mi"}}
#: From this many tasks on, its memory grows with the run (``resources``).
SIZED_FROM_TASKS = 100
#: Memory per task past ``SIZED_FROM_TASKS``, requested and allowed (KiB): bench/bench_k8s_scale.py measured its
#: working set at 62 MiB for 100 tasks and 308 MiB (peak 347) for 1,000, about 280 KiB a task.
REQUEST_KIB_PER_TASK, LIMIT_KIB_PER_TASK = 320, 512


def resources(tasks: int) -> Manifest:
    """The supervisor container's requests and limits for a run of ``tasks`` tasks: ``RESOURCES``, with memory
    added for each task past ``SIZED_FROM_TASKS`` (1,000 tasks: 409 MiB requested, 834 MiB allowed)."""
    extra = max(0, tasks - SIZED_FROM_TASKS)
    if not extra:
        return RESOURCES
    memory = {side: f"{int(RESOURCES[side]['memory'].removesuffix('Mi')) * 1024 + extra * per_task}Ki"
              for side, per_task in (("requests", REQUEST_KIB_PER_TASK), ("limits", LIMIT_KIB_PER_TASK))}
    return {side: {**RESOURCES[side], "memory": memory[side]} for side in RESOURCES}
#: Times a failing supervisor is replaced before its Job fails; then nothing supervises the run (``status`` says
#: its supervisor is lost). One that left or was moved (``POD_FAILURE_POLICY``) does not count.
BACKOFF_LIMIT = 20
#: A supervisor that left its tasks to the next one (SIGTERM: exit 143) or whose pod was disrupted (an eviction, a
#: drain, a preemption) is replaced without spending the budget: those are moves, not failures. (The Job
#: controller's back-off delay before the replacement still grows with each. A pod whose end the kubelet did not
#: see, under load, reads exit 137 ``ContainerStatusUnknown`` instead, kubernetes#104107, and counts: the budget
#: allows for that.)
POD_FAILURE_POLICY: Manifest = {"rules": [
    {"action": "Ignore", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                         "values": [int(ExitCode.PREEMPTED)]}},
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
]}
#: Seconds between SIGTERM and SIGKILL: it only leaves (the job runs on; the next supervisor adopts it).
GRACE_SECONDS = 10
#: Its uid and gid: not the tasks' (``launcher.plan.images.TASK_UID``): nothing a task's process owns or may
#: touch as its user (a file on a volume, a process on the node) is the supervisor's. No user of the image has
#: it: what it runs of the image is world-readable, and its HOME and working directory are its own ``emptyDir``.
SUPERVISOR_UID = 2000


def role_rules(plan: Plan) -> list[Manifest]:
    """What the supervisor may do: read, watch and delete the run's pods, read their logs, list and watch the Jobs, read,
    unsuspend (patch) and replace (delete, create) the run's own, read and update its ConfigMap. Kubernetes
    cannot limit ``create`` to names: Jobs are created in the namespace. No ``pods/exec``: it reads a task's
    stacks from the task's own stack endpoint (``launcher.protocol.stack_endpoint``). With a gang, ``patch`` of
    the run's PodGroup by name (its ``minCount``: ``gang.GangSize``); a Job it replaces keeps its pod template,
    whose pod joins that group, which ``up`` made."""
    jobs = sorted(task.name for task in plan.tasks)
    group = [{"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"],
              "resourceNames": [naming.pod_group_name(plan.name)], "verbs": ["patch"]}] if gang.wanted(plan) else []
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch", "create"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": jobs, "verbs": ["get", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [naming.config_map_name(plan.name)],
         "verbs": ["get", "update"]},
        *group,
    ]


def objects(plan: Plan, program: Sequence[str]) -> list[Manifest]:
    """The supervisor's ServiceAccount, Role, RoleBinding and Job running ``program`` (the one supervisor
    process, ``KubernetesBackend.render``), in apply order; none when the spec opts out."""
    k8s = plan.spec.kubernetes
    if not k8s.supervisor:
        return []
    name = naming.supervisor_name(plan.name)
    labels = {**k8s.labels, **naming.labels(plan.name, plan.run_id), naming.LABEL_SUPERVISOR: plan.name}
    meta = {"name": name, "namespace": k8s.namespace, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": role_rules(plan)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": k8s.namespace}]},
        job(plan, program),
    ]


def job(plan: Plan, program: Sequence[str]) -> Manifest:
    """The Job that keeps one supervisor pod running until the run has ended and is cleaned up."""
    k8s = plan.spec.kubernetes
    name = naming.supervisor_name(plan.name)
    labels = {**k8s.labels, **naming.supervisor_labels(plan.name, plan.run_id)}
    image = plan.spec.image or ImageVariant.CPU.default_tag  # tfcluster's, whatever image the tasks run
    container: Manifest = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "args": list(program),  # the image's entrypoint (tini) stays in front
        "env": [{"name": "TFCLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "TFCLUSTER_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "HOME", "value": TMP_DIR}],
        "resources": resources(len(plan.tasks)),
        "securityContext": container_security(),
        "workingDir": TMP_DIR,  # the image's WORKDIR is the tasks' user's home
        "volumeMounts": [{"name": TMP_VOLUME, "mountPath": TMP_DIR}],
    }
    pod: Manifest = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "serviceAccountName": name,
        "automountServiceAccountToken": True,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": SUPERVISOR_UID, "runAsGroup": SUPERVISOR_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": TMP_VOLUME, "emptyDir": {}}],
        **supervisor_placement(plan),
        **priority(plan),
    }
    spec: Manifest = {"backoffLimit": BACKOFF_LIMIT, "podReplacementPolicy": "Failed", "podFailurePolicy": POD_FAILURE_POLICY,
                      "template": {"metadata": {"labels": labels}, "spec": pod}}
    if k8s.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = k8s.ttl_seconds_after_finished
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": k8s.namespace,
                                                                 "labels": labels}, "spec": spec}
