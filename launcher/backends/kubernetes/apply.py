"""Applying a run's objects to the cluster and removing them (``submit``, ``cancel``/``down``), through ``KubeApi``.

Contract: ``submit`` creates every object of the dry run's files, exactly as rendered but for one field: the
supervisor's objects are owned by the run's ConfigMap (``ownerReferences``: a rendered file cannot know its uid),
so the garbage collector removes them with it (objects other than Jobs and the checkpoint claim are replaced if
they exist and carry this cluster's labels; an existing claim is kept with its checkpoints; existing Jobs of the
same cluster refuse the launch; a ``kubernetes.service_account`` that does not exist refuses it too, so does a
ResourceQuota that could never admit the run's Jobs' pods at once, ``quota``, before anything is created, and so does
a task pod the API server would not admit, ``require_admission``: a PriorityClass that does not exist), and
deletes what it created if any step fails. ``cancel`` deletes the run's objects, Jobs first, and a claim only when
``launcher.backends.checkpoints.created_for`` says tfcluster made it for the run. Every failure is a
``LaunchError`` naming the request (``KubeApi.errors``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from launcher.backends import checkpoints
from launcher.backends.kubernetes import pod_admission, quota
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.manifests import objects
from launcher.backends.workspace import ensure_images
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun

#: What ``submit`` creates; ``cancel`` deletes in reverse, Jobs first, so no pod outlives its config.
#: The PodGroup goes last: its pods are gone by then, and a launcher whose Role lacks PodGroups (one from before them)
#: has removed the rest of the run when it is refused.
APPLIED = (Kind.POD_GROUP, Kind.SERVICE_ACCOUNT, Kind.ROLE, Kind.ROLE_BINDING, Kind.CONFIG_MAP, Kind.SERVICE, Kind.NETWORK_POLICY,
           Kind.PERSISTENT_VOLUME_CLAIM, Kind.JOB)
#: A TensorBoard (``tensorboard``): ``cancel`` deletes one a killed command left first, Deployment first.
BOARD = (Kind.DEPLOYMENT, Kind.SERVICE, Kind.NETWORK_POLICY)
#: How long ``cancel`` waits for the supervisor pod to go (its grace, and the kubelet's), and how often it looks.
SUPERVISOR_GONE_SECONDS, GONE_POLL_SECONDS = 40.0, 0.5
#: Kept when it exists (it holds checkpoints); deleted only by ``cancel(volumes=True)``.
KEPT = frozenset({Kind.PERSISTENT_VOLUME_CLAIM})


def submit(api: KubeApi, dry_run: DryRun, namespace: str) -> None:
    """Create the dry run's objects in ``namespace`` (see the module's contract)."""
    plan = dry_run.plan
    existing = of_cluster(api, Kind.JOB, namespace, plan.name)
    if existing:
        being_deleted = any(j["metadata"].get("deletionTimestamp") for j in existing)
        hint = "it is still shutting down, retry in a few seconds" if being_deleted else f"run `tfcluster down {plan.name}` first"
        raise LaunchError(f"cluster {plan.name!r} already exists in namespace {namespace!r}: {hint}")
    if plan.spec.kubernetes.service_account:
        require_account(api, plan.spec.kubernetes.service_account, namespace)
    applied = objects(dry_run.files)  # parsed once: a run of hundreds of tasks is megabytes of YAML
    never = quota.never_admitted(api, [obj["spec"]["template"]["spec"] for obj in applied if obj["kind"] == Kind.JOB],
                                 namespace)
    if never:
        raise LaunchError(f"{plan.name} cannot start in namespace {namespace}: " + "; ".join(never))
    if plan.workspace:
        ensure_images(plan.workspace)  # built here and pushed to the registry the nodes pull from
    created: list[Obj] = []
    owners: list[dict[str, Any]] = []  # the run's ConfigMap, once created: the supervisor's objects go with it
    admitted = False  # the API server admits the tasks' pods (asked before the first task's Job)
    try:
        for obj in applied:
            obj = _in_namespace(obj, namespace)
            if owners and naming.LABEL_SUPERVISOR in obj["metadata"].get("labels", {}):
                obj = {**obj, "metadata": {**obj["metadata"], "ownerReferences": owners}}
            elif obj["kind"] == Kind.JOB and not admitted:
                require_admission(api, obj, namespace)
                admitted = True
            if apply(api, obj, namespace):
                created.append(obj)
            if obj["kind"] == Kind.CONFIG_MAP and obj["metadata"]["name"] == naming.config_map_name(plan.name):
                owners = [owner(config_map(api, plan.name, namespace))]
    except LaunchError as exc:
        left = []
        for obj in reversed(created):
            try:
                delete(api, Kind(obj["kind"]), obj["metadata"]["name"], namespace)
            except LaunchError:
                left.append(f"{obj['kind']} {obj['metadata']['name']}")
        cleanup = f"could not remove {', '.join(left)}" if left else f"removed the {len(created)} object(s) it had created"
        raise LaunchError(f"{exc}; {cleanup}") from None


def _in_namespace(obj: Obj, namespace: str) -> Obj:
    """``obj`` as created in ``namespace`` (``--namespace`` may differ from the spec's): its own namespace, and a
    RoleBinding's ServiceAccount subjects' (the run's own accounts live beside it)."""
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    if obj["kind"] == Kind.ROLE_BINDING:
        obj["subjects"] = [{**subject, "namespace": namespace} if subject.get("kind") == "ServiceAccount" else subject
                           for subject in obj.get("subjects", [])]
    return obj


def require_account(api: KubeApi, account: str, namespace: str) -> None:
    """The spec's own ServiceAccount must exist: the API server refuses every pod of a missing one."""
    with api.errors(f"read ServiceAccount {account}"):
        found = api.read_if_exists(Kind.SERVICE_ACCOUNT, account, namespace)
    if found is None:
        raise LaunchError(f"kubernetes.service_account: no ServiceAccount {account!r} in namespace "
                          f"{namespace!r}; create it (tfcluster uses it, never creates or deletes it)")


def require_admission(api: KubeApi, job: Obj, namespace: str) -> None:
    """The API server must admit the pod of a task's ``job`` (``pod_admission``: every task's pod is alike in what
    admission checks, its PriorityClass above all), asked once its ServiceAccount exists: a pod it refuses for good
    would leave the run pending in silence."""
    why = pod_admission.refusal(api, job, namespace)
    if why is not None and pod_admission.lasting(why):
        raise LaunchError(f"the API server refuses the run's pods (a dry run of {job['metadata']['name']}'s): {why}")


def apply(api: KubeApi, obj: Obj, namespace: str) -> bool:
    """Create ``obj``; replace it if it exists (except kept kinds). True if this call created it.

    Only an object left by this cluster (its tfcluster labels) is replaced;
    anything else of the same name is someone else's and fails the launch.
    Jobs are never replaced: an existing one fails the launch.
    """
    kind, name = Kind(obj["kind"]), obj["metadata"]["name"]
    with _supervisor_hint(obj), api.errors(f"create {kind} {name}"):
        if kind is Kind.JOB:
            api.create(kind, namespace, obj)
            return True
        if api.create_unless_exists(kind, namespace, obj):
            return True
        if kind not in KEPT:
            existing = api.read(kind, name, namespace)["metadata"]
            cluster = obj["metadata"]["labels"][naming.LABEL_CLUSTER]  # every kind but Job carries it
            if not checkpoints.created_for(existing.get("labels"), cluster):
                raise LaunchError(
                    f"{kind} {name} already exists in namespace {namespace} and was not made by tfcluster "
                    f"for cluster {cluster}; rename the cluster or remove it"
                )
            version = existing["resourceVersion"]
            api.replace(kind, name, namespace, {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}})
        return False


@contextmanager
def _supervisor_hint(obj: Obj) -> Iterator[None]:
    """A refused supervisor object (``kubernetes.supervisor``: labelled ``naming.LABEL_SUPERVISOR``) says what to
    ask for, or how to go without it."""
    try:
        yield
    except LaunchError as exc:
        if naming.LABEL_SUPERVISOR not in obj["metadata"].get("labels", {}) or "403" not in str(exc):
            raise
        raise LaunchError(f"{exc}; the in-cluster supervisor needs these rights (k8s/rbac-launcher.yaml): ask your "
                          "cluster admin, or set kubernetes.supervisor: false (then a supervisor process on this "
                          "machine supervises the run)") from None


def delete(api: KubeApi, kind: Kind, name: str, namespace: str) -> None:
    """Delete ``name`` (a Job in the foreground: gone only after its pods); one gone already is fine."""
    propagation = "Foreground" if kind is Kind.JOB else "Background"
    with api.unless_gone(f"delete {kind} {name}"):
        api.delete(kind, name, namespace, propagation=propagation)


def cancel(api: KubeApi, name: str, namespace: str, volumes: bool = False) -> None:
    """Delete the cluster's objects, Jobs first (Foreground: a Job is gone only after its pods), its
    in-cluster supervisor before them.

    Every TensorBoard showing the run (its own, or one shared with other
    runs) that a killed ``tensorboard`` command left goes first.
    """
    for job in of_supervisor(api, Kind.JOB, namespace, name):
        delete(api, Kind.JOB, job["metadata"]["name"], namespace)  # first: it would act on what goes next
    _wait_gone(api, namespace, name)
    owner = naming.config_map_name(name)
    for kind in BOARD:
        for obj in select(api, kind, namespace, f"{naming.LABEL_MANAGED}={naming.MANAGER}"):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(ref.get("kind") == "ConfigMap" and ref.get("name") == owner for ref in refs):
                delete(api, kind, obj["metadata"]["name"], namespace)
    for kind in reversed(APPLIED):
        if kind in KEPT and not volumes:
            continue
        for obj in _of_cluster_if_served(api, kind, namespace, name):
            if kind not in KEPT or checkpoints.created_for(obj["metadata"].get("labels"), name):
                delete(api, kind, obj["metadata"]["name"], namespace)


def _wait_gone(api: KubeApi, namespace: str, name: str) -> None:
    """Until the run's supervisor pod is gone (it leaves within its grace), at most ``SUPERVISOR_GONE_SECONDS``: a
    supervisor still running could create again a Job just deleted (a restart under way)."""
    ends = time.monotonic() + SUPERVISOR_GONE_SECONDS
    while of_supervisor(api, Kind.POD, namespace, name) and time.monotonic() < ends:
        time.sleep(GONE_POLL_SECONDS)


def _of_cluster_if_served(api: KubeApi, kind: Kind, namespace: str, cluster: str) -> list[Obj]:
    """``of_cluster``; none of a kind the cluster does not serve (404: PodGroups where the gate is off)."""
    found: list[Obj] = []
    with api.unless_gone(f"list {kind}s"):
        found = api.select(kind, namespace, _selector(cluster))
    return found


def of_cluster(api: KubeApi, kind: Kind, namespace: str, cluster: str, task: str | None = None, *,
               fields: str | None = None, metadata_only: bool = False) -> list[Obj]:
    """The objects of ``cluster`` that tfcluster made (both labels: a user's object naming the cluster is not);
    with ``task``, only that task's; ``fields`` and ``metadata_only`` as ``KubeApi.select`` takes them."""
    selector = _selector(cluster)
    return select(api, kind, namespace, selector if task is None else f"{selector},{naming.LABEL_TASK}={task}",
                  fields=fields, metadata_only=metadata_only)


def _selector(cluster: str) -> str:
    """What ``cluster``'s objects carry: both labels (a user's object naming the cluster is not tfcluster's)."""
    return f"{naming.LABEL_MANAGED}={naming.MANAGER},{naming.LABEL_CLUSTER}={cluster}"


def of_supervisor(api: KubeApi, kind: Kind, namespace: str, cluster: str) -> list[Obj]:
    """The Job or pods of ``cluster``'s in-cluster supervisor (``naming.supervisor_labels``: not among its tasks)."""
    return select(api, kind, namespace, f"{naming.LABEL_MANAGED}={naming.MANAGER},{naming.LABEL_SUPERVISOR}={cluster}")


def select(api: KubeApi, kind: Kind, namespace: str, selector: str, *, fields: str | None = None,
           metadata_only: bool = False) -> list[Obj]:
    """The objects of ``kind`` matching ``selector`` (``LaunchError`` if they cannot be listed)."""
    with api.errors(f"list {kind}s"):
        return api.select(kind, namespace, selector, fields=fields, metadata_only=metadata_only)


def config_map(api: KubeApi, name: str, namespace: str) -> Obj:
    """The run's ConfigMap; ``LaunchError`` when there is no such run."""
    config_map_name = naming.config_map_name(name)
    with api.errors(f"read ConfigMap {config_map_name}"):
        found = api.read_if_exists(Kind.CONFIG_MAP, config_map_name, namespace)
    if found is None:
        raise LaunchError(f"no cluster named {name!r} in namespace {namespace!r}")
    return found


def write_data(api: KubeApi, config_map: Obj, key: str, value: str, namespace: str) -> None:
    """The run's ConfigMap (as read: ``config_map``) with ``key`` set to ``value`` (what the supervisor publishes
    and keeps there); a ConfigMap changed since it was read (409) is read again and written once more."""
    name = config_map["metadata"]["name"]
    for attempt in range(2):
        data = {**config_map.get("data", {}), key: value}
        with api.errors(f"update ConfigMap {name}"):
            written = api.replace_unless_changed(Kind.CONFIG_MAP, name, namespace, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": config_map["metadata"], "data": data})
        if written is not None:
            return
        if attempt == 0:
            with api.errors(f"read ConfigMap {name}"):
                config_map = api.read(Kind.CONFIG_MAP, name, namespace)
    raise LaunchError(f"cannot update ConfigMap {name}: it changed again while it was written (409 twice)")


RecordT = TypeVar("RecordT", bound=BaseModel)


def record(config_map: Obj | None, key: str, model: type[RecordT]) -> RecordT | None:
    """The ``model`` kept under ``key`` in the run's ConfigMap (its ``RunConfig``: ``JOB_KEY``); None without one
    (an object of an older launch, or being deleted)."""
    try:
        return None if config_map is None else model.model_validate_json(config_map["data"][key])
    except (KeyError, ValidationError):
        return None


def owner(config_map: Obj) -> dict[str, Any]:
    """An owner reference to a run's ConfigMap: what it owns goes with the run (the garbage collector)."""
    meta = config_map["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}
