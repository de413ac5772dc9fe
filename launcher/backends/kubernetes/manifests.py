"""Kubernetes manifests for a plan: pure functions, no Kubernetes client import.

Contract: ``render(plan, supervisor)`` writes the objects ``submit`` applies as YAML files, in apply order,
plus a ``kustomization.yaml`` (``kubectl apply -k DIR``; ``supervisor``: the program of the run's in-cluster
supervisor, which the backend gives); ``objects(files)`` reads them back; ``render_tfjob(plan)`` exports the
cluster as a Kubeflow ``TFJob`` instead. One suspended Job per task (``task_job``), which the run's supervisor
starts; the output is deterministic and linear in the number of tasks (the cluster written once, in a
ConfigMap); Kubernetes 1.33 or later. Why: docs/architecture.md (Decisions).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import yaml

from launcher.backends.escaping import literal
from launcher.backends.kubernetes import admission_policy, gang, supervisor_objects
from launcher.backends.kubernetes.pods import (
    CHECKPOINT_VOLUME,
    CLUSTER_KEY,
    CONFIG_DIR,
    CONFIG_VOLUME,
    JOB_KEY,
    SPEC_KEY,
    TENSORBOARD_KEY,
    TMP_DIR,
    TMP_VOLUME,
    WORKSPACE_VOLUME,
    Manifest,
    camel,
    checkpoint_claim_name,
    container_security,
    hardened_pod,
    meta,
    priority,
)
from launcher.backends.kubernetes.target import KubernetesTarget
from launcher.backends.kubernetes.tensorboard import tensorboard_objects
from launcher.plan import naming
from launcher.plan.held_program import container_program
from launcher.plan.planner import Plan, Task, make_plan
from launcher.plan.storage import clash
from launcher.plan.workspace import CONTAINER_WORKSPACE
from launcher.protocol import endpoint_wire
from launcher.protocol import env as task_env
from launcher.protocol.checkpoint_layout import is_object_store
from launcher.spec import tfjob_vocabulary as vocabulary
from launcher.spec.image_reference import pull_policy
from launcher.spec.models import ClusterSpec, RoleType, SuccessPolicy
from launcher.spec.problems import Problem
from launcher.spec.redact import without_env_values

#: The task container's name: a TFJob's must be this one, and the native Jobs use the same.
CONTAINER = vocabulary.CONTAINER
#: The container key of a task's command, by ``Task.replaces_entrypoint``: after the image's ENTRYPOINT or in its place.
_COMMAND_KEY = {False: "args", True: "command"}
#: Where the init container sees the workspace volume while it copies the image's workspace into it.
WORKSPACE_SEED = "/tfcluster-workspace"
KUSTOMIZATION = "kustomization.yaml"
#: A ConfigMap holds at most 1 MiB.
CONFIG_MAP_LIMIT = 1024 * 1024



class RoleGroup:
    """The tasks of one role, which share everything but their index (checked, since one template serves all: a
    TFJob's replicas; a task's Job is the group of that one task)."""

    def __init__(self, cluster: str, role: RoleType, tasks: list[Task]):
        first = tasks[0]
        shared = _shared_env(first)
        for task in tasks:
            if task.name != naming.task_name(cluster, role, task.index) or (
                task.image, task.command, task.port, task.resources, _shared_env(task)
            ) != (first.image, first.command, first.port, first.resources, shared):
                raise ValueError(f"task {task.name} differs from {first.name}: one Job template cannot run both")
        self.role = role
        self.tasks = tasks
        self.first = first
        self.env = shared

    @property
    def replicas(self) -> int:
        return len(self.tasks)


def role_groups(plan: Plan) -> list[RoleGroup]:
    by_role: dict[RoleType, list[Task]] = {}
    for task in plan.tasks:
        by_role.setdefault(task.type, []).append(task)
    return [RoleGroup(plan.name, role, tasks) for role, tasks in by_role.items()]


#: Variables that differ between the tasks of one role; the pod template derives them instead.
PER_TASK_ENV = frozenset({task_env.TASK_NAME, task_env.IS_CHIEF})


def _shared_env(task: Task) -> dict[str, str]:
    return {k: v for k, v in task.env.items() if k not in PER_TASK_ENV}


def _lead_env(group: RoleGroup) -> list[dict[str, Any]]:
    """``TFCLUSTER_IS_CHIEF`` when every task of the role agrees (all but a chief-less cluster's workers)."""
    values = {task.env.get(task_env.IS_CHIEF) for task in group.tasks}
    return [{"name": task_env.IS_CHIEF, "value": values.pop()}] if len(values) == 1 and None not in values else []


# --- objects -----------------------------------------------------------------


def service_accounts(plan: Plan) -> list[Manifest]:
    """The pods' identity: tfcluster's own (no RBAC binding, no API token mounted), none for the spec's own."""
    if plan.spec.kubernetes.service_account:
        return []
    return [{
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(plan, naming.service_account_name(plan.name)),
        "automountServiceAccountToken": False,
    }]


def _config_data(plan: Plan, *, with_cluster: bool = True) -> dict[str, str]:
    """``job.json`` = TFCLUSTER_JOB (same for every task); ``cluster.json`` = the training cluster, once;
    ``tensorboard.json`` = the run's TensorBoard objects, which ``tfcluster tensorboard`` applies; ``spec.json`` =
    the spec without its env values (``launcher.spec.redact``), which ``tfcluster report`` plans again."""
    data = {JOB_KEY: plan.tasks[0].env[task_env.JOB]}
    if with_cluster:
        data[CLUSTER_KEY] = json.dumps(plan.cluster, indent=2) + "\n"
        data[SPEC_KEY] = json.dumps(without_env_values(plan.spec.model_dump(mode="json", exclude_defaults=True))) + "\n"
        board = tensorboard_objects(plan)
        if board:
            data[TENSORBOARD_KEY] = json.dumps(board, indent=1) + "\n"
    return data


def config_map_problems(spec: ClusterSpec) -> list[Problem]:
    """The cluster must fit one ConfigMap (1 MiB): a problem naming the largest role otherwise."""
    plan = make_plan(spec, KubernetesTarget())
    size = sum(len(v.encode()) for v in _config_data(plan).values())
    if size <= CONFIG_MAP_LIMIT:
        return []
    largest = max((r for r in RoleType if spec.roles.replicas(r)), key=spec.roles.replicas)
    return [Problem(
        f"roles.{largest.value}.replicas",
        f"the cluster description is {size} bytes, over the 1 MiB a ConfigMap holds; use fewer tasks or a shorter name",
    )]


def volume_problems(spec: ClusterSpec) -> list[Problem]:
    """``kubernetes.volumes``/``volume_mounts`` must leave the pod's own volumes alone: not their names, and no
    mount at, above or below their paths (``KubernetesTarget.storage``'s and the checkpoint claim's), by the
    rule of ``launcher.plan.storage``: one problem per mount, the first path it meets."""
    k8s = spec.kubernetes
    target = KubernetesTarget()
    checkpoint_dir = target.checkpoint_dir(spec)
    claim = {} if is_object_store(checkpoint_dir) else {checkpoint_dir: "the checkpoint volume"}
    storage = target.storage(spec)
    problems = [
        Problem(f"kubernetes.volumes.{i}.name", f"{volume.name!r} is a volume tfcluster mounts itself; rename it")
        for i, volume in enumerate(k8s.volumes)
        if volume.name in (TMP_VOLUME, CONFIG_VOLUME, CHECKPOINT_VOLUME, WORKSPACE_VOLUME)
    ]
    for i, mount in enumerate(k8s.volume_mounts):
        met = clash(mount.mount_path, replace(storage, mounts={**claim, **storage.mounts}))
        if met:
            problems.append(Problem(f"kubernetes.volume_mounts.{i}.mount_path",
                                    f"{mount.mount_path} {met}; mount it elsewhere"))
    return problems


def config_map(plan: Plan, *, with_cluster: bool = True) -> Manifest:
    data = _config_data(plan, with_cluster=with_cluster)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(plan, naming.config_map_name(plan.name)), "data": data}


def headless_service(plan: Plan, groups: list[RoleGroup]) -> Manifest:
    """The pods' DNS subdomain: ``<task>.<cluster>`` resolves, also before a pod is ready."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(plan, naming.service_name(plan.name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {naming.LABEL_CLUSTER: plan.name},
            "ports": [{"name": f"tf-{port}", "port": port, "targetPort": port} for port in _ports(groups)],
        },
    }


def network_policy(plan: Plan, groups: list[RoleGroup]) -> Manifest:
    """Only the cluster's own pods may connect to its pods, and only on the TF ports; and the run's supervisor pod
    to their stack endpoints (``launcher.protocol.stack_endpoint``)."""
    own_pods = {"matchLabels": {naming.LABEL_CLUSTER: plan.name}}
    supervisor = {"matchLabels": {naming.LABEL_SUPERVISOR: plan.name}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(plan, naming.network_policy_name(plan.name)),
        "spec": {
            "podSelector": own_pods,
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": own_pods}],
                    "ports": [{"protocol": "TCP", "port": port} for port in _ports(groups)],
                },
                {"from": [{"podSelector": supervisor}], "ports": [{"protocol": "TCP", "port": endpoint_wire.PORT}]},
            ],
        },
    }


def checkpoint_claim(plan: Plan) -> Manifest | None:
    """The ReadWriteMany claim to create, or None (object-store URL, or an existing claim named in the spec)."""
    claim = plan.spec.kubernetes.volume_claim
    if is_object_store(plan.run_config.checkpoint_dir) or claim.name:
        return None
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": claim.size}}}
    if claim.storage_class:
        spec["storageClassName"] = claim.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta(plan, naming.checkpoint_volume_name(plan.name)),
        "spec": spec,
    }


#: A task Job's ``podFailurePolicy``: a pod with the ``DisruptionTarget`` condition (preempted, evicted, its node
#: drained, tainted or lost) fails the Job with reason ``PodFailurePolicy`` and a message naming the condition
#: (``runtime``: a preemption, also once the pod is gone and read by a supervisor that never saw it).
DISRUPTED = {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def task_job(plan: Plan, task: Task) -> Manifest:
    """The Job running one task, rendered suspended: the run's supervisor starts it (``runtime``).

    One pod, ``restartPolicy: Never`` and ``backoffLimit: 0``: Kubernetes never runs the task again by itself
    (restarts, their budget and the failure rules are the supervisor's, ``launcher.supervision.decisions``), and
    ``podReplacementPolicy: Failed`` never starts a pod while the last one still terminates; a pod Kubernetes
    disrupted fails the Job by ``DISRUPTED`` (the same end, said in the Job's condition, which outlives the pod: the
    next supervisor reads a preemption there). The pod's hostname is the task's name in the run's headless Service:
    its address in every TF_CONFIG.
    """
    group = RoleGroup(plan.name, task.type, [task])
    job_spec: dict[str, Any] = {"suspend": True, "completions": 1, "parallelism": 1, "backoffLimit": 0,
                                "podReplacementPolicy": "Failed", "podFailurePolicy": DISRUPTED}
    if plan.spec.kubernetes.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = plan.spec.kubernetes.ttl_seconds_after_finished
    template = pod_template(plan, group, _task_env(plan, task))
    template["metadata"]["labels"].update(naming.labels(plan.name, plan.run_id, task.type, task.index))
    template["spec"] = gang.join(plan, {"hostname": task.name, **template["spec"]})
    metadata = meta(plan, task.name, task.type)
    metadata["labels"].update(naming.labels(plan.name, plan.run_id, task.type, task.index))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {**job_spec, "template": template}}


def _task_env(plan: Plan, task: Task) -> list[dict[str, Any]]:
    """Env of a task's pod: the entrypoint builds TF_CONFIG from the cluster file (launcher.worker.tfconfig); any
    other program gets the plan's TF_CONFIG. Its agent (``launcher.plan.held_program``) serves the program's stacks to the supervisor
    on ``STACKS_PORT`` (``launcher.protocol.stack_endpoint``)."""
    env: list[dict[str, Any]] = [
        {"name": task_env.TASK_INDEX, "value": str(task.index)},
        {"name": task_env.TASK_TYPE, "value": task.type.value},
        {"name": task_env.TASK_NAME, "value": task.name},
        {"name": task_env.IS_CHIEF, "value": task.env.get(task_env.IS_CHIEF, "0")},
        {"name": task_env.CLUSTER_FILE, "value": f"{CONFIG_DIR}/{CLUSTER_KEY}"},
        {"name": endpoint_wire.STACKS_PORT, "value": str(endpoint_wire.PORT)},
    ]
    if task.type is RoleType.EVALUATOR:
        env.append({"name": task_env.TASK_ADDRESS, "value": task.address})
    if not task.runs_entrypoint:
        env.append({"name": task_env.TF_CONFIG, "value": literal(json.dumps(plan.tf_config(task),
                                                                            separators=(",", ":")))})
    return env + _job_env(plan)


def _job_env(plan: Plan) -> list[dict[str, Any]]:
    ref = {"configMapKeyRef": {"name": naming.config_map_name(plan.name), "key": JOB_KEY}}
    return [{"name": task_env.JOB, "valueFrom": ref}]


def _plain_env(group: RoleGroup) -> list[dict[str, Any]]:
    """The plan's env as literal values (``$`` escaped: Kubernetes would expand ``$(VAR)``)."""
    return [{"name": k, "value": literal(v)} for k, v in group.env.items() if k != task_env.JOB]


def pod_template(plan: Plan, group: RoleGroup, env: list[dict[str, Any]], *, native: bool = True) -> Manifest:
    """The pod of one task of ``group``: hardened, with the spec's scheduling, resource and volume settings.

    ``/tmp``, the checkpoint dir, the spec's ``kubernetes.volume_mounts``
    and, for a plan with a workspace, the workspace are the only writable
    paths (TF needs a writable tmp; a user program writes where it runs, as
    on the user's machine): an init container copies the image's workspace
    into an ``emptyDir`` mounted over it. ``native``: a pod
    of a task's Job, which mounts the ConfigMap's cluster JSON; otherwise a TFJob
    replica's pod (the operator sets TF_CONFIG).
    """
    k8s = plan.spec.kubernetes
    program = container_program(plan, group.first) if native else group.first.command
    mounts: list[dict[str, Any]] = [{"name": TMP_VOLUME, "mountPath": TMP_DIR}]
    volumes: list[dict[str, Any]] = [{"name": TMP_VOLUME, "emptyDir": {}}]
    if native:
        items = [{"key": CLUSTER_KEY, "path": CLUSTER_KEY}]
        mounts.append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": CONFIG_VOLUME, "configMap": {"name": naming.config_map_name(plan.name), "items": items}})
    claim = checkpoint_claim_name(plan)
    if claim is not None:
        mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": plan.run_config.checkpoint_dir})
        volumes.append({"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": claim}})
    if plan.workspace is not None:
        mounts.append({"name": WORKSPACE_VOLUME, "mountPath": CONTAINER_WORKSPACE})
        volumes.append({"name": WORKSPACE_VOLUME, "emptyDir": {}})
    volumes += [{"name": volume.name, **volume.source} for volume in k8s.volumes]
    mounts += [camel(mount.model_dump(exclude_none=True)) for mount in k8s.volume_mounts]
    resources = _resources(group)
    pulled = _pull_policy(plan, group.first.image)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": group.first.image,
        **pulled,
        # args: the image's ENTRYPOINT (tini, PID 1: signals, reaping) stays in front; command: in its place,
        # as a TFJob's command (Task.replaces_entrypoint). An empty command keeps the image's own CMD too.
        **({_COMMAND_KEY[group.first.replaces_entrypoint]: [literal(arg) for arg in program]} if program else {}),
        "ports": [{"name": "tf", "containerPort": group.first.port, "protocol": "TCP"}],
        "env": env + _plain_env(group),
    }
    if k8s.env_from_secrets:
        container["envFrom"] = [{"secretRef": {"name": name}} for name in k8s.env_from_secrets]
    if resources:
        container["resources"] = resources
    container["securityContext"] = container_security()
    container["volumeMounts"] = mounts
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # SIGTERM (eviction, preemption, deletion) to SIGKILL: the time the coordinated save gets.
        "terminationGracePeriodSeconds": plan.policy.save_grace_seconds,
        "subdomain": naming.service_name(plan.name),
        **hardened_pod(plan, [container], volumes),
    }
    if plan.workspace is not None:
        pod["initContainers"] = [{**_workspace_seed(group.first.image, resources), **pulled}]
    if k8s.scheduler_name:
        pod["schedulerName"] = k8s.scheduler_name
    pod.update(priority(plan))
    metadata: dict[str, Any] = {"labels": {**k8s.pod_labels, **naming.labels(plan.name, plan.run_id, group.role)}}
    if k8s.pod_annotations:
        metadata["annotations"] = dict(k8s.pod_annotations)
    return {"metadata": metadata, "spec": pod}


def _pull_policy(plan: Plan, image: str) -> dict[str, str]:
    """A task container's ``imagePullPolicy``: ``Always`` for a workspace layer pushed to a registry, else
    ``image_reference.pull_policy`` (``IfNotPresent`` for the worker image loaded into the nodes).

    The layer's tag names the workspace and its base by name (``launcher.plan.workspace``): rebuilt on a
    rebuilt base, it is pushed under the same tag, and a node that pulled the old one would keep it under
    ``IfNotPresent``. ``Always`` has the node compare the registry's digest at each pod start (layers it
    has are not downloaded again).
    """
    pushed = plan.workspace is not None and any(layer.push for layer in plan.workspace.images)
    return {"imagePullPolicy": "Always" if pushed else pull_policy(image)}


def _workspace_seed(image: str, resources: dict[str, Any]) -> Manifest:
    """The init container that copies the workspace ``image`` carries into the pod's writable workspace volume."""
    seed: dict[str, Any] = {
        "name": WORKSPACE_VOLUME,
        "image": image,
        "command": ["cp", "-R", f"{CONTAINER_WORKSPACE}/.", f"{WORKSPACE_SEED}/"],  # the copies are uid 1000's
    }
    if resources:
        seed["resources"] = resources
    seed["securityContext"] = container_security()
    seed["volumeMounts"] = [{"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE_SEED}]
    return seed


def _resources(group: RoleGroup) -> dict[str, Any]:
    """Requests = limits (guaranteed QoS for the set values); GPUs are limits only."""
    res = group.first.resources
    amounts: dict[str, str] = {}
    if res.cpu is not None:
        amounts["cpu"] = str(int(res.cpu)) if float(res.cpu).is_integer() else f"{round(res.cpu * 1000)}m"
    if res.memory is not None:
        amounts["memory"] = res.memory
    result: dict[str, Any] = {}
    if amounts:
        result = {"requests": dict(amounts), "limits": dict(amounts)}
    if res.gpu:
        result.setdefault("limits", {})["nvidia.com/gpu"] = str(res.gpu)
    return result


def _ports(groups: Iterable[RoleGroup]) -> list[int]:
    return sorted({g.first.port for g in groups})


# --- plan -> objects -> files -------------------------------------------------


def objects(files: dict[str, str]) -> list[Manifest]:
    """The objects of rendered ``files`` in apply order (the kustomization's), exactly as the files hold them."""
    order = yaml.safe_load(files[KUSTOMIZATION])["resources"]
    return [obj for name in order for obj in yaml.safe_load_all(files[name]) if obj]


def _files(plan: Plan, supervisor: Sequence[str]) -> dict[str, list[Manifest]]:
    groups = role_groups(plan)
    claim = checkpoint_claim(plan)
    jobs = [task_job(plan, task) for task in plan.tasks]
    files = {
        "config.yaml": [*service_accounts(plan), config_map(plan)],
        "network.yaml": [headless_service(plan, groups), network_policy(plan, groups)],
        "storage.yaml": [claim] if claim else [],
        "jobs.yaml": [*gang.pod_group(plan, jobs), *jobs],  # the group first: its pods wait for it otherwise
        # last: it supervises what exists; first in it, the params of the admission policy holding it to the run
        "supervisor.yaml": [*admission_policy.params(plan), *supervisor_objects.objects(plan, supervisor)],
    }
    return {name: objects for name, objects in files.items() if objects}


def render(plan: Plan, supervisor: Sequence[str]) -> dict[str, str]:
    """``<file>.yaml`` (multi-document) per group of objects (what a pod needs before the Jobs, the supervisor
    last), plus ``kustomization.yaml`` listing them; ``supervisor``: the in-cluster supervisor's program."""
    return _as_files(plan, _files(plan, supervisor))


def render_tfjob(plan: Plan) -> dict[str, str]:
    """The cluster as a Kubeflow ``TFJob`` (kubeflow.org/v1) plus the objects it needs.

    The training operator sets TF_CONFIG itself (addresses
    ``<cluster>-<role>-<index>.<namespace>.svc``, one Service per pod), so
    the ConfigMap carries only TFCLUSTER_JOB; pods keep the same hardening,
    volumes and scheduling settings as the native Jobs. Restart policies map
    one to one (TFJob has ``ExitCode``); the budget is ``runPolicy.backoffLimit``.
    """
    groups = role_groups(plan)
    claim = checkpoint_claim(plan)
    spec, policy = plan.spec, plan.policy
    run_policy: dict[str, Any] = {vocabulary.BACKOFF_LIMIT: policy.max_restarts,
                                  vocabulary.CLEAN_POD_POLICY: vocabulary.CLEAN_RUNNING}
    if policy.deadline_seconds is not None:
        run_policy[vocabulary.ACTIVE_DEADLINE] = policy.deadline_seconds
    if spec.kubernetes.ttl_seconds_after_finished is not None:
        run_policy[vocabulary.TTL_AFTER_FINISHED] = spec.kubernetes.ttl_seconds_after_finished
    replica_specs = {}
    for group in groups:
        task_name = {"name": task_env.TASK_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        template = pod_template(plan, group, [task_name, *_lead_env(group), *_job_env(plan)], native=False)
        template["spec"]["containers"][0]["ports"][0]["name"] = vocabulary.PORT_NAME
        for owned_by_operator in ("subdomain", "restartPolicy"):  # per-pod Services; replica restartPolicy
            del template["spec"][owned_by_operator]
        replica_specs[vocabulary.REPLICA_TYPES[group.role]] = {
            "replicas": group.replicas,
            "restartPolicy": vocabulary.RESTART_POLICIES[policy.restart],
            "template": template,
        }
    tfjob_spec: dict[str, Any] = {"runPolicy": run_policy, "tfReplicaSpecs": replica_specs}
    if policy.success is not SuccessPolicy.CHIEF:
        tfjob_spec["successPolicy"] = vocabulary.SUCCESS_POLICIES[policy.success]
    tfjob = {"apiVersion": vocabulary.API_VERSION, "kind": vocabulary.KIND, "metadata": meta(plan, plan.name),
             "spec": tfjob_spec}
    files = {
        "config.yaml": [*service_accounts(plan), config_map(plan, with_cluster=False)],
        "network.yaml": [network_policy(plan, groups)],
        "storage.yaml": [claim] if claim else [],
        "tfjob.yaml": [tfjob],
    }
    return _as_files(plan, {name: objects for name, objects in files.items() if objects})


def _as_files(plan: Plan, files: dict[str, list[Manifest]]) -> dict[str, str]:
    header = f"# Rendered by tfcluster from cluster {plan.name!r} (run {plan.run_id}); regenerate, do not edit.\n"
    rendered = {name: header + _dump(objects) for name, objects in files.items()}
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(files),
    }
    rendered[KUSTOMIZATION] = header + _dump([kustomization])
    return rendered


#: libyaml's emitter where PyYAML has it (its wheels do): the same text, about 8 times faster on a Job per task.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):
    """Multi-line strings (the cluster JSON) as literal blocks, and no YAML anchors, so the files stay readable."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _dump(objects: list[Manifest]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)

