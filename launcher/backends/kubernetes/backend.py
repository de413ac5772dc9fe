"""The Kubernetes backend: the façade the registry and the CLI use over applying, supervising, reporting, logs.

Contract (besides ``launcher.backends.interface``): ``validate``, ``render`` and ``dry_run`` are pure; only
``create`` imports the ``kubernetes`` client. Every object carries ``tfcluster.io/cluster=<name>``, by which
``describe``, ``logs`` and ``cancel`` find the run in the backend's namespace; ``cancel(volumes=True)``
deletes only a claim tfcluster made for the run. The run's one supervisor (``launcher.supervision``) runs in
its supervisor pod, or, with ``kubernetes.supervisor: false``, as a detached process on the launching machine;
both drive ``runtime.KubernetesRuntime`` and publish to the run's ConfigMap (``cluster_state``), which
``describe`` reads. Where the supervisor runs: docs/supervision.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from launcher.backends import supervisor_process
from launcher.backends.interface import Backend, BackendOptions
from launcher.backends.kubernetes import admission_policy, apply, board, gang, pod_admission, pod_io
from launcher.backends.kubernetes import history as k8s_history
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.cluster_state import NAMESPACE_ENV, ConfigMapStore, plan_of, pod_state, published
from launcher.backends.kubernetes.follow import follow_task
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, connect, context_namespace
from launcher.backends.kubernetes.manifests import config_map_problems, render, volume_problems
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.kubernetes.target import KubernetesTarget, registry_problems, target
from launcher.backends.lines import interleave
from launcher.backends.tensorboard import Board
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.storage import storage_problems
from launcher.plan.targets import BackendKind
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem
from launcher.supervision import harness
from launcher.supervision.history import RunHistory
from launcher.supervision.statefile import write_private
from launcher.supervision.status import JobStatus, State, SupervisorState

DEFAULT_NAMESPACE = "default"
#: In a launching machine's state dir of a run supervised from there: where its supervisor reaches the cluster.
KUBE_FILE = "kube.json"

log = logging.getLogger(__name__)


class KubernetesOptions(BackendOptions):
    """Where the Kubernetes backend works: ``namespace`` (None: the spec's for a launch, else the kubeconfig
    context's, as kubectl, else ``default``) and the kubeconfig ``context`` (None: the current one, or the in-cluster
    service account)."""

    namespace: str | None = None
    context: str | None = None


class KubernetesBackend(Backend[KubernetesOptions]):
    Options = KubernetesOptions
    kind = BackendKind.K8S

    def __init__(self, api_client: Any, namespace: str | None = None, *, context: str | None = None,
                 context_namespace: str | None = None, pause: Callable[[float], None] = time.sleep):
        """``namespace``: where it works (None: a launch goes to the spec's namespace, and the other requests to
        ``context_namespace``, the kubeconfig context's, else ``default``)."""
        self.api = KubeApi(api_client)
        self.namespace = namespace
        self.context = context
        self.context_namespace = context_namespace
        self.pause = pause

    @classmethod
    def target(cls, spec: ClusterSpec, *, launching: bool = False) -> KubernetesTarget:
        return target(spec, launching=launching)

    @classmethod
    def validate(cls, spec: ClusterSpec) -> list[Problem]:
        """The cluster in one ConfigMap, a registry for a workspace, the checkpoint dir and the spec's mounts clear
        of the pod's own mounts (``launcher.plan.storage``, ``KubernetesTarget.storage``)."""
        return [*config_map_problems(spec), *registry_problems(spec), *storage_problems(spec, cls.target(spec)),
                *volume_problems(spec)]

    @classmethod
    def render(cls, plan: Plan) -> dict[str, str]:
        """The manifests; the in-cluster supervisor, if asked for, runs the one supervisor process on the run's
        ConfigMap (``NAMESPACE/NAME``, the namespace its pod's, expanded by Kubernetes: ``state_of``)."""
        where = f"$({NAMESPACE_ENV})/{plan.name}"
        return render(plan, [*supervisor_process.command(cls.kind, python="python"), where, harness.ADOPT_FLAG])

    @classmethod
    def dry_run(cls, plan: Plan) -> DryRun:
        """The manifests, whether the run is supervised from the launching machine (``kubernetes.supervisor:
        false``), and else the admission policy holding its supervisor to it, which an administrator applies once
        (``admission_policy.admin_files``)."""
        return DryRun(plan=plan, files=cls.render(plan), supervised_from_here=not plan.spec.kubernetes.supervisor,
                      admin_files=admission_policy.admin_files(plan))

    @classmethod
    def create(cls, options: KubernetesOptions) -> KubernetesBackend:
        """A backend talking to the cluster of the kubeconfig (``options.context``) in ``options.namespace``, else in
        the namespace that context names (a run this machine did not launch: ``status``, ``logs``, ``down``)."""
        return cls(connect(options.context), options.namespace, context=options.context,
                   context_namespace=context_namespace(options.context))

    @classmethod
    def state_of(cls, target: str) -> harness.StateDir:
        """``NAMESPACE/NAME`` (the supervisor pod: its ServiceAccount; ``cluster_state.pod_state``), or the state dir
        of a run supervised from this machine (the cluster its ``KUBE_FILE`` names): either way the run's record is
        its ConfigMap (``cluster_state.ConfigMapStore``)."""
        if target.startswith("/"):
            root = Path(target)
            kube = json.loads((root / KUBE_FILE).read_text())
            store = ConfigMapStore(KubeApi(connect(kube["context"])), kube["name"], kube["namespace"], in_pod=False)
            return harness.StateDir(root, record=store)
        namespace, _, name = target.partition("/")
        return pod_state(KubeApi(connect(None)), name, namespace)

    @classmethod
    def host(cls, plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        """Each task a Job of its own (``runtime.KubernetesRuntime``); in the supervisor pod SIGTERM (the pod
        deleted or drained) leaves the tasks to the next supervisor pod, which adopts them from the published
        status; a run already over is left as it is."""
        store = state.record
        if not isinstance(store, ConfigMapStore):
            raise harness.CannotRun("the Kubernetes supervisor keeps the run's record in its ConfigMap")
        previous = store.read_status() if adopt else None
        if previous is not None and previous.state.terminal:
            raise harness.NothingToDo(f"the run is over ({previous.state.value}); nothing to supervise")
        runtime = KubernetesRuntime(store.api, plan, store.namespace, in_cluster=store.in_pod)
        return harness.Hosted(plan=plan, runtime=runtime, leave_on_sigterm=store.in_pod)

    def fit(self, dry_run: DryRun) -> DryRun:
        """``gang.fit``: without the gang (one line says so) where the cluster serves no PodGroups."""
        return gang.fit(self.api, dry_run, self.dry_run)

    def submit(self, dry_run: DryRun) -> None:
        """Apply the objects; the supervisor pod starts the suspended task Jobs (one line says when nothing holds it
        to its run: ``admission_policy.unguarded``), or, supervised from this machine, a detached supervisor
        process does (if it cannot, what was applied is removed)."""
        plan = dry_run.plan
        namespace = self.namespace or plan.spec.kubernetes.namespace
        self.namespace = namespace  # describe/logs/cancel then look where this launch went
        state = self._local_state(plan.name) if dry_run.supervised_from_here else None  # refused before applying
        apply.submit(self.api, dry_run, namespace)
        if plan.spec.kubernetes.supervisor and admission_policy.unguarded(self.api, namespace):
            log.warning("%s", admission_policy.unguarded_note(namespace))
        if state is not None:
            state.create(plan)
            write_private(state.root / KUBE_FILE, json.dumps({"name": plan.name, "namespace": namespace,
                                                             "context": self.context}))
            harness.launch(state, supervisor_process.process(type(self)),
                           lambda: apply.cancel(self.api, plan.name, namespace))

    def adopt(self, name: str) -> list[str]:
        """A run supervised from this machine whose supervisor process died gets a new one that adopts it (its
        status is the one published in the run's ConfigMap: ``state_of`` the local state dir)."""
        state = self._local_state(name)
        if not state.exists():
            return []
        return harness.adopt(self.state_of(str(state.root)), supervisor_process.process(type(self)))

    def describe(self, name: str) -> JobStatus | None:
        """What the run's supervisor last published (pending before it did), with that supervisor's state."""
        namespace = self._ns()
        with self.api.errors(f"read ConfigMap {naming.config_map_name(name)}"):
            config_map = self.api.read_if_exists(Kind.CONFIG_MAP, naming.config_map_name(name), namespace)
        if config_map is None:
            return None
        # what waits, read at the cost of what waits: the Pending pods whole, every pod and Job by its metadata only
        waiting = apply.of_cluster(self.api, Kind.POD, namespace, name, fields=k8s_status.WAITING)
        pods = apply.of_cluster(self.api, Kind.POD, namespace, name, metadata_only=True)
        status = k8s_status.pending(published(config_map) or JobStatus(
            name, self.kind, State.PENDING, message="waiting for its supervisor"),
            k8s_status.latest_waiting(waiting, pods), self._refused(self._podless(name, pods, namespace), namespace))
        local = self._local_state(name)
        if local.exists():
            alive = local.supervisor() is not None
            return replace(status, supervisor=SupervisorState.ALIVE if alive else SupervisorState.LOST,
                           supervisor_note="" if alive else "its process on this machine is gone")
        state, note = k8s_status.supervisor_state(apply.of_supervisor(self.api, Kind.JOB, namespace, name),
                                                  apply.of_supervisor(self.api, Kind.POD, namespace, name))
        return replace(status, supervisor=state, supervisor_note=note)

    def _podless(self, name: str, pods: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
        """``k8s_status.podless`` of the run's Jobs given its ``pods`` (metadata): the Jobs are read whole only when
        their metadata shows one without a pod (``k8s_status.unowned``)."""
        if not k8s_status.unowned(apply.of_cluster(self.api, Kind.JOB, namespace, name, metadata_only=True), pods):
            return []
        return k8s_status.podless(apply.of_cluster(self.api, Kind.JOB, namespace, name), pods)

    def _refused(self, jobs: list[dict[str, Any]], namespace: str) -> dict[str, str]:
        """Why the API server refuses the pod of the first of ``jobs`` (started, with no pod: ``pod_admission``), by
        task: one dry run per look, however many Jobs a restart just made (their pods differ in nothing admission
        checks)."""
        why = pod_admission.refusal(self.api, jobs[0], namespace) if jobs else None
        return {} if why is None else {jobs[0]["metadata"]["name"]: why}

    def history(self, name: str) -> RunHistory | None:
        """``launcher.backends.kubernetes.history``: the plan made again from the run's ConfigMap, each task's
        events from its pods still there."""
        status = self.describe(name)
        return None if status is None else k8s_history.read(self.api, name, self._ns(), status)

    def stacks(self, name: str) -> dict[str, str | None]:
        """Every running task's stacks, read in its pod by the image's py-spy through ``pods/exec``."""
        namespace = self._ns()
        if not apply.of_cluster(self.api, Kind.JOB, namespace, name):
            raise LaunchError(f"no cluster named {name!r} in namespace {namespace}")
        pods = apply.of_cluster(self.api, Kind.POD, namespace, name)
        return pod_io.read_stacks(self.api, name, k8s_status.runs_by_task(pods), namespace)

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        """The newest run of each task (or of ``task``); ``follow``: each planned task's log across its runs, a
        pod still starting included, until the run has ended (``follow.follow_task``)."""
        namespace = self._ns()
        if follow:
            tasks = [t.name for t in plan_of(self.api, name, namespace).tasks]
            if task is not None and task not in tasks:
                raise LaunchError(f"no task {task!r} in cluster {name!r} (tasks: {', '.join(tasks)})")
            followers = {t: partial(follow_task, self.api, name, t, namespace, partial(self.over, name))
                         for t in ([task] if task is not None else tasks)}
            yield from followers[task]() if task is not None else interleave(followers)
            return
        runs = k8s_status.runs_by_task(apply.of_cluster(self.api, Kind.POD, namespace, name))
        latest = {naming.task_name(name, role, index): runs[role, index][-1].name for role, index in _task_order(runs)}
        if task is not None:
            if task not in latest:
                known = ", ".join(latest) or "none has started yet"
                raise LaunchError(f"no pod for task {task!r} of cluster {name!r} (tasks: {known})")
            yield from pod_io.log_lines(self.api, latest[task], namespace, False)
            return
        for task_name, pod in latest.items():
            yield from (f"{task_name} | {line}" for line in pod_io.log_lines(self.api, pod, namespace, False))

    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        """``launcher.backends.kubernetes.board.tensorboard`` in the backend's namespace."""
        return board.tensorboard(self.api, names, self._ns(), host, port, self.pause)

    def cancel(self, name: str, volumes: bool = False) -> None:
        """The supervisor process this machine runs for the run stopped (it stops the tasks), then ``apply.cancel``
        (the supervisor pod first, then the Jobs; a claim only if tfcluster made it for the run)."""
        state = self._local_state(name)
        if state.exists():
            harness.stop(state)
        apply.cancel(self.api, name, self._ns(), volumes)
        state.remove()

    def _ns(self) -> str:
        return self.namespace or self.context_namespace or DEFAULT_NAMESPACE

    def _local_state(self, name: str) -> harness.StateDir:
        """The state dir of a run supervised from this machine (``exists`` only for such a run)."""
        return harness.StateDir.of(self.kind, name)


def _task_order(runs: dict[tuple[RoleType, int], Any]) -> list[tuple[RoleType, int]]:
    """Task keys in plan order: chief, workers, ps, evaluator, by index."""
    return sorted(runs, key=lambda key: (key[0].order, key[1]))
