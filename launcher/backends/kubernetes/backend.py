"""The Kubernetes backend: apply a plan's manifests, supervise, report, stream logs, tear down.

Contract (besides ``launcher.backends.api``): ``validate``, ``render`` and
``render_tfjob`` are pure (``launcher.backends.kubernetes.manifests``); the
official ``kubernetes`` client is imported only by ``create``. ``submit``
creates every object of the dry run's files, exactly as rendered
(objects other than Jobs and the checkpoint claim are replaced if they
exist; an existing claim is kept with its checkpoints; existing Jobs of the
same cluster refuse the launch; a ``kubernetes.service_account`` that does
not exist refuses it too), and deletes what it created if any step fails. ``watch_round`` is one step of the launcher's watch loop: the Job
controller already retries, fails and times out tasks; ``watch_round`` adds
what it cannot express (MultiWorkerMirrored gang restarts of survivors that
hang, the stall watchdog (``launcher.backends.kubernetes.stall``), the
failure rules the Job controller cannot enforce (``launcher.backends.kubernetes.failures``:
a ``fail`` rule on a log pattern or roles ends the run's Jobs), and
deleting the Jobs left running once the run ended).

``tensorboard`` applies the run's TensorBoard objects that the rendered
ConfigMap holds, or for several runs one board mounting each run's claim
(``tensorboard.shared_board``), owned by every shown run's ConfigMap (so
``down`` of any of them and the garbage collector, once all are gone,
remove it), waits for a ready pod, forwards ``host:port`` to it through
the API server (``pods/<pod>/portforward``) and deletes it when left.
When every log dir is a bucket, TensorBoard runs here instead.

Every object carries ``tfcluster.io/cluster=<name>``; ``describe``, ``logs``
and ``cancel`` find the cluster by that label in the backend's namespace.
``cancel(volumes=True)`` deletes a claim only when it carries tfcluster's
labels for the cluster (``launcher.backends.checkpoints.created_for``, every
backend's removal guard): a claim the spec names
(``kubernetes.volume_claim.name``) or one of the default name that existed
before is never deleted, nor a claim in ``kubernetes.volumes``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from launcher.backends import checkpoints
from launcher.backends.api import Backend, BackendOptions
from launcher.backends.kubernetes import failures as k8s_failures
from launcher.backends.kubernetes import stall as k8s_stall
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.manifests import CONTAINER, config_map_problems, objects, render, volume_problems
from launcher.backends.kubernetes.pods import JOB_KEY
from launcher.backends.kubernetes.portforward import PortForwarder
from launcher.backends.kubernetes.target import KubernetesTarget, registry_problems, target
from launcher.backends.kubernetes.tensorboard import BoardRun, shared_board, stored_board
from launcher.backends.lines import interleave, iter_lines
from launcher.backends.pyspy import PYSPY_ENV, PYSPY_SECONDS, Ran, read_container_stacks, say_none
from launcher.backends.tensorboard import PORT, Board, log_dir_of, serve_locally, url, wait_until_serving
from launcher.backends.workspace import ensure_images
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.storage import storage_problems
from launcher.plan.targets import BackendKind
from launcher.protocol.events import Event, EventReader
from launcher.protocol.paths import is_object_store
from launcher.protocol.progress import JobProgress, fold, seed
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import LOG_TAIL_LINES, ClusterSpec, RoleType, RuleAction, Strategy
from launcher.spec.problems import Problem
from launcher.supervision import harness
from launcher.supervision.history import RunHistory
from launcher.supervision.rules import Action
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.stack_evidence import GAP_SECONDS, read, two_samples
from launcher.supervision.stall import SIGNS_OF_LIFE, WATCHED_EVENTS, StallVerdict, conclude, describe, judge
from launcher.supervision.status import JobStatus, StallStatus, State
from launcher.supervision.stragglers import stragglers

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
#: A MultiWorkerMirrored survivor still running this long after a peer failed is restarted (survivors normally fail in seconds).
GANG_GRACE_SECONDS = 60.0
#: Log lines read from the lead task (and the evaluator) to show progress.
PROGRESS_TAIL_LINES = 50
#: Log lines of the lead's pod the stall watchdog reads each round (the more, the more of its history it sees).
STALL_TAIL_LINES = 1000
#: How much longer than py-spy's own bound an exec in a pod may take (the API server, the kubelet, the websocket).
EXEC_SLACK_SECONDS = 20


@dataclass(frozen=True)
class _Kind:
    api: str
    suffix: str


_KINDS = {
    "ServiceAccount": _Kind("core", "service_account"),
    "ConfigMap": _Kind("core", "config_map"),
    "Service": _Kind("core", "service"),
    "NetworkPolicy": _Kind("networking", "network_policy"),
    "PersistentVolumeClaim": _Kind("core", "persistent_volume_claim"),
    "Job": _Kind("batch", "job"),
    "Pod": _Kind("core", "pod"),
    "Deployment": _Kind("apps", "deployment"),
}
#: What ``submit`` creates, in apply order; ``cancel`` deletes in reverse, Jobs first, so no pod outlives its config.
_APPLIED = ("ServiceAccount", "ConfigMap", "Service", "NetworkPolicy", "PersistentVolumeClaim", "Job")
#: A TensorBoard (``tensorboard``): ``cancel`` deletes one a killed command left first, Deployment first.
_BOARD = ("Deployment", "Service", "NetworkPolicy")
#: How long the TensorBoard Deployment may take to have a ready pod (image pull, scheduling).
BOARD_READY_SECONDS = 300.0
#: Kept when it exists (it holds checkpoints); deleted only by ``cancel(volumes=True)``.
_KEPT = frozenset({"PersistentVolumeClaim"})


def _connect(context: str | None) -> Any:
    """An API client for the kubeconfig's cluster (``context``), or the in-cluster config inside a pod."""
    from kubernetes import client, config

    where = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
        else:
            # Read KUBECONFIG now (the client's default is frozen when it is first imported); a ':' list is merged.
            api_client = config.new_client_from_config(config_file=where, context=context)
    except (config.ConfigException, OSError) as exc:
        raise BackendUnavailable(
            f"no usable Kubernetes configuration ({where}): {exc}. Point KUBECONFIG at a kubeconfig "
            "(e.g. from your cloud's `get-credentials`), or run inside a cluster."
        ) from None
    return api_client


class KubernetesOptions(BackendOptions):
    """Where the Kubernetes backend works: ``namespace`` (None: the spec's, else ``default``) and the
    kubeconfig ``context`` (None: the current one, or the in-cluster service account)."""

    namespace: str | None = None
    context: str | None = None


class KubernetesBackend(Backend[KubernetesOptions]):
    Options = KubernetesOptions
    kind = BackendKind.K8S

    def __init__(
        self,
        api_client: Any,
        namespace: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        gang_grace: float = GANG_GRACE_SECONDS,
        linger: float | None = None,
        pause: Callable[[float], None] = time.sleep,
        stack_gap: float = GAP_SECONDS,
    ):
        from kubernetes import client

        self._apis: dict[str, Any] = {
            "core": client.CoreV1Api(api_client),
            "batch": client.BatchV1Api(api_client),
            "networking": client.NetworkingV1Api(api_client),
            "apps": client.AppsV1Api(api_client),
        }
        self._stream_lock = threading.Lock()  # the client swaps its request function while opening a stream
        self._host = api_client.configuration.host
        self.namespace = namespace
        self._clock = clock
        self._gang_grace = gang_grace
        self._linger = linger
        self._pause = pause  # between a suspected stall's two stack samples
        self._stack_gap = stack_gap
        self._stall_looks: dict[str, float] = {}  # lead pod -> when its stacks were last read and showed no stall

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
        return render(plan)

    @classmethod
    def create(cls, options: KubernetesOptions) -> KubernetesBackend:
        """A backend talking to the cluster of the kubeconfig (``options.context``) in ``options.namespace``."""
        return cls(_connect(options.context), options.namespace)

    # --- submit ----------------------------------------------------------

    def submit(self, dry_run: DryRun) -> None:
        plan = dry_run.plan
        namespace = self.namespace or plan.spec.kubernetes.namespace
        self.namespace = namespace  # describe/logs/cancel then look where this launch went
        existing = self._list("Job", namespace, plan.name)
        if existing:
            being_deleted = any(j["metadata"].get("deletionTimestamp") for j in existing)
            hint = "it is still shutting down, retry in a few seconds" if being_deleted else f"run `tfcluster down {plan.name}` first"
            raise LaunchError(f"cluster {plan.name!r} already exists in namespace {namespace!r}: {hint}")
        if plan.spec.kubernetes.service_account:
            self._require_account(plan.spec.kubernetes.service_account, namespace)
        if plan.workspace:
            ensure_images(plan.workspace)  # built here and pushed to the registry the nodes pull from
        created: list[dict[str, Any]] = []
        try:
            for obj in objects(dry_run.files):
                obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
                if self._apply(obj, namespace):
                    created.append(obj)
        except LaunchError as exc:
            left = []
            for obj in reversed(created):
                try:
                    self._delete(obj["kind"], obj["metadata"]["name"], namespace)
                except LaunchError:
                    left.append(f"{obj['kind']} {obj['metadata']['name']}")
            cleanup = f"could not remove {', '.join(left)}" if left else f"removed the {len(created)} object(s) it had created"
            raise LaunchError(f"{exc}; {cleanup}") from None

    def _require_account(self, account: str, namespace: str) -> None:
        """The spec's own ServiceAccount must exist: the API server refuses every pod of a missing one."""
        from kubernetes.client.exceptions import ApiException

        with self._api_errors(f"read ServiceAccount {account}"):
            try:
                self._call("ServiceAccount", "read", account, namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                raise LaunchError(f"kubernetes.service_account: no ServiceAccount {account!r} in namespace "
                                  f"{namespace!r}; create it (tfcluster uses it, never creates or deletes it)") from None

    def _apply(self, obj: dict[str, Any], namespace: str) -> bool:
        """Create ``obj``; replace it if it exists (except kept kinds). True if this call created it.

        Only an object left by this cluster (its tfcluster labels) is replaced;
        anything else of the same name is someone else's and fails the launch.
        """
        from kubernetes.client.exceptions import ApiException

        kind, name = obj["kind"], obj["metadata"]["name"]
        with self._api_errors(f"create {kind} {name}"):
            try:
                self._call(kind, "create", namespace, body=obj)
                return True
            except ApiException as exc:
                if exc.status != 409 or kind == "Job":
                    raise
            if kind not in _KEPT:
                existing = self._call(kind, "read", name, namespace)["metadata"]
                if not checkpoints.created_for(existing.get("labels"), obj["metadata"]["labels"][naming.LABEL_CLUSTER]):
                    raise LaunchError(
                        f"{kind} {name} already exists in namespace {namespace} and was not made by tfcluster "
                        f"for cluster {obj['metadata']['labels'][naming.LABEL_CLUSTER]}; rename the cluster or remove it"
                    )
                version = existing["resourceVersion"]
                self._call(kind, "replace", name, namespace, body={**obj, "metadata": {**obj["metadata"], "resourceVersion": version}})
            return False

    # --- watch_round / describe ---------------------------------------------

    def supervises_only_when_watched(self, plan: Plan) -> bool:
        """The MWMS gang-restart safety net and the stall watchdog (a lead that reports its progress) run in
        ``watch_round``: unwatched, a hung gang or a stalled job waits for the deadline, and failure rules beyond
        exit codes (``JobPolicy.rules_need_watch``) are not applied."""
        watched = (plan.strategy is Strategy.MULTI_WORKER_MIRRORED or plan.run_config.lead_runs_entrypoint
                   or plan.policy.rules_need_watch())
        return watched and plan.policy.deadline_seconds is None

    def watch_round(self, name: str) -> list[str]:
        """One supervision step; returns what it did (one line per deleted pod or Job, and per stall)."""
        namespace = self._ns()
        jobs, pods = self._list("Job", namespace, name), self._list("Pod", namespace, name)
        status = k8s_status.job_status(name, jobs, pods)
        if status is None:
            return []
        now = self._clock()
        actions = []
        for pod in k8s_status.stale_gang_pods(jobs, pods, now, self._gang_grace):
            self._delete("Pod", pod, namespace)
            actions.append(f"gang restart: deleted {pod} (it outlived a failed peer; its Job recreates it)")
        for job in k8s_status.leftover_jobs(jobs, status, now, self._linger):
            self._delete("Job", job, namespace)
            actions.append(f"run {status.state.value}: deleted Job {job}")
        if status.state in (State.PENDING, State.RUNNING, State.RESTARTING) and not actions:
            actions.extend(self._watch_failures(name, namespace, jobs, pods, now))
        if status.state is State.RUNNING and not actions:
            actions.extend(self._watch_stall(name, namespace, jobs, pods, status.restarts, now))
        return actions

    def _watch_failures(self, name: str, namespace: str, jobs: list[dict[str, Any]], pods: list[dict[str, Any]],
                        now: float) -> list[str]:
        """Judge each failed pod once by the failure rules (``launcher.backends.kubernetes.failures``): a ``fail``
        rule the engine could not enforce ends the training Jobs through their deadline, its message kept in the
        run's ConfigMap for ``status``; a ``restart``/``continue`` rule it could not enforce is said, once."""
        policy = k8s_status.job_policy(jobs[0])
        if not policy.failure_rules:
            return []
        config_map = self._config_map(name, namespace)
        record = _record(config_map, k8s_failures.FAILURES_KEY, k8s_failures.FailureRecord) or k8s_failures.FailureRecord()
        todo = k8s_failures.pending(policy, name, pods, record.judged)
        if not todo:
            return []
        reader = EventReader(k8s_status.event_token(jobs))
        actions = []
        for failed in todo:
            record.judged.append(failed.pod)
            try:
                lines = list(self._log_lines(failed.pod, namespace, follow=False, tail=LOG_TAIL_LINES))
            except LaunchError:
                lines = []  # no log to read (the node is gone): the rules without a log pattern still decide
            failure = failed.with_log([line for line in lines if line.strip() and not reader.carries_event(line)])
            found = k8s_failures.verdict(policy, failure)
            if found is None or found.native:
                continue  # the policy's or the engine's (podFailurePolicy) to decide
            what = f"task {failed.task} exited with code {failure.exit_code}" + (" (OOM-killed)" if failure.oom_killed else "")
            if found.match.action is RuleAction.FAIL:
                record.message = f"failed: {found.match.describe()}: {what}"
                actions.append(f"failure rules: {record.message}")
                for job in jobs:
                    if k8s_status.job_role(job).trains and not (k8s_status.job_failed(job) or k8s_status.job_complete(job)):
                        self._end_job(job, now, namespace)
                        actions.append(f"failure rules: ended Job {job['metadata']['name']} (its deadline is now)")
                break
            actions.append(f"failure rules: {what}: {found.match.describe()} is not enforced on Kubernetes "
                           "(the Job controller replaces the pod under its budget)")
        self._write_data(config_map, k8s_failures.FAILURES_KEY, record.model_dump_json(), namespace)
        return actions

    def _watch_stall(self, name: str, namespace: str, jobs: list[dict[str, Any]], pods: list[dict[str, Any]],
                     restarts_used: int, now: float) -> list[str]:
        """The stall watchdog's round (``launcher.backends.kubernetes.stall``): judge the lead's running pod; on
        a suspected stall read every task's stacks twice (``launcher.supervision.stack_evidence``) and conclude
        as every supervisor does; record what decided in the run's ConfigMap and, once per pod, act on a stall
        as ``Rules.decide_stall`` says: restart = delete the restart group's pods (their Jobs recreate them; a
        stuck task cannot save, it is killed when its grace ends and the Job controller counts it against the
        budget), fail = end the training Jobs through their deadline, warn = the line only."""
        policy = k8s_status.job_policy(jobs[0])
        runs = k8s_status.runs_by_task(pods)
        lead = runs.get((policy.lead.role, policy.lead.index), [])
        if not lead or lead[-1].phase != "Running" or lead[-1].deleting or lead[-1].started is None:
            return []
        pod, config_map = lead[-1], self._config_map(name, namespace)
        record, run_config = _record(config_map, k8s_stall.STALL_KEY, k8s_stall.StallRecord), _record(config_map, JOB_KEY, RunConfig)
        if record is not None and record.pod == pod.name:
            return []  # this pod's stall was acted on
        reader = EventReader(k8s_status.event_token(jobs))
        reporting = run_config is not None and run_config.lead_runs_entrypoint and reader.reads  # steps it can read
        assert pod.started is not None
        events = self._recent_events([pod], namespace, reader, STALL_TAIL_LINES)
        if events is None:
            return []  # its last report is beyond the lines read: the watchdog cannot tell when it was
        clock = k8s_stall.clock(pod.started, events, reporting, self._stall_looks.get(pod.name))
        judgement = judge(clock, now, policy.stall_floor_seconds)
        if judgement.verdict is not StallVerdict.SUSPECTED:
            return []
        last: dict[str, str | None] = {}

        def sample() -> dict[str, str | None]:
            dumps = self._read_stacks(name, runs, namespace)
            last.update({task: dump for task, dump in dumps.items() if dump is not None or task not in last})
            return dumps

        def wait(seconds: float) -> bool:
            self._pause(seconds)
            return True  # whether the lead advanced meanwhile is read once both samples are in

        trains = {naming.task_name(name, role, index): role.trains for role, index in runs}
        samples = two_samples(sample, wait, {}, trains, self._stack_gap)
        again = self._recent_events([pod], namespace, reader, STALL_TAIL_LINES)
        if samples is None or again is None or k8s_stall.clock(pod.started, again, reporting).since != clock.since:
            return []  # the lead advanced meanwhile
        reading = read(samples)
        finding = conclude(judgement, reading)
        if finding.verdict is not StallVerdict.STALLED:
            self._stall_looks[pod.name] = now
            status = record.status if record is not None else StallStatus(watching=True)
            checked = replace(status, evidence=finding.evidence,
                              last_check=describe(judgement, reading, finding, self._stack_gap))
            self._write_stall(config_map, k8s_stall.StallRecord(pod=record.pod if record else "", status=checked),
                              namespace)
            return []
        number = (record.status.stalls if record else 0) + 1
        names, why = reading.suspects, reading.why
        directory = self._write_stacks(name, number, last)
        what = describe(judgement, reading, finding, self._stack_gap, directory)
        decision = k8s_stall.rules(policy, jobs, name).decide_stall(names, restarts_used, what,
                                                                    finished=clock.finished)
        stall = StallStatus(watching=True, stalls=number, message=decision.message, suspects=list(names), reason=why,
                            stacks_dir=directory, evidence=finding.evidence, last_check=decision.message)
        self._write_stall(config_map, k8s_stall.StallRecord(pod=pod.name, status=stall), namespace)
        actions = [f"stall watchdog: {decision.message}"]
        if decision.action is Action.RESTART:
            latest = {naming.task_name(name, role, index): views[-1] for (role, index), views in runs.items()}
            for task in decision.restart:
                view = latest.get(task)
                if view is not None and not view.deleting and view.phase in ("Pending", "Running"):
                    self._delete("Pod", view.name, namespace)
                    actions.append(f"stall restart: deleted {view.name} (its Job recreates it)")
        elif decision.action is Action.FAIL:
            for job in jobs:
                if k8s_status.job_role(job).trains and not (k8s_status.job_failed(job) or k8s_status.job_complete(job)):
                    self._end_job(job, now, namespace)
                    actions.append(f"stall: ended Job {job['metadata']['name']} (its deadline is now)")
        return actions

    def history(self, name: str) -> RunHistory | None:
        """Not on Kubernetes yet: no plan is kept, and a pod's log ends with the pod (a restart's is gone)."""
        raise LaunchError("`report` is not available on k8s yet: a run's plan and its replaced pods' logs are not kept")

    def stacks(self, name: str) -> dict[str, str | None]:
        """Every running task's stacks, read in its pod by the image's py-spy through ``pods/exec``."""
        namespace = self._ns()
        if not self._list("Job", namespace, name):
            raise LaunchError(f"no cluster named {name!r} in namespace {namespace}")
        return self._read_stacks(name, k8s_status.runs_by_task(self._list("Pod", namespace, name)), namespace)

    def _read_stacks(self, name: str, runs: dict[tuple[RoleType, int], list[k8s_status.PodView]],
                     namespace: str) -> dict[str, str | None]:
        """``{task: dump, None if it gave none}`` of each task whose latest pod runs (one line on stderr why not);
        py-spy reads any Python program, so no task is asked to dump its own (no signal reaches a pod)."""
        dumps: dict[str, str | None] = {}
        for (role, index), views in sorted(runs.items(), key=lambda item: (item[0][0].value, item[0][1])):
            if views[-1].phase != "Running" or views[-1].deleting:
                continue
            task = naming.task_name(name, role, index)
            dump, why = read_container_stacks(partial(self._exec, views[-1].name, namespace))
            if dump is None:
                say_none(task, why)
            dumps[task] = dump
        return dumps

    def _write_stacks(self, name: str, number: int, dumps: dict[str, str | None]) -> str | None:
        """The dumps under this machine's state directory of the run (``down`` removes it); None if unwritable."""
        try:
            return write_stacks(harness.StateDir.of(self.kind, name).stacks, number, dumps)
        except OSError as exc:
            log.warning("tfcluster: cannot write the stacks of %s: %s", name, exc)
            return None

    def _exec(self, pod: str, namespace: str, command: list[str]) -> Ran | str:
        """``command`` run in the pod's task container (``pods/exec``), with py-spy's environment."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
        from websocket import WebSocketException

        try:
            with self._stream_lock:
                response = stream(self._apis["core"].connect_get_namespaced_pod_exec, pod, namespace,
                                  command=["env", *(f"{k}={v}" for k, v in PYSPY_ENV.items()), *command],
                                  container=CONTAINER, stdin=False, stdout=True, stderr=True, tty=False,
                                  _preload_content=False)
            try:
                response.run_forever(timeout=PYSPY_SECONDS + EXEC_SLACK_SECONDS)
                if response.is_open():
                    return f"exec in pod {pod} did not end within {PYSPY_SECONDS + EXEC_SLACK_SECONDS:.0f} s"
                return Ran(response.returncode, response.read_stdout(), response.read_stderr())
            finally:
                response.close()
        except (ApiException, WebSocketException, OSError, ValueError, KeyError) as exc:
            reason = getattr(exc, "reason", None) or exc
            return f"exec in pod {pod} failed: {str(reason).splitlines()[0] if str(reason) else type(exc).__name__}"

    def _write_stall(self, config_map: dict[str, Any], record: k8s_stall.StallRecord, namespace: str) -> None:
        self._write_data(config_map, k8s_stall.STALL_KEY, record.model_dump_json(), namespace)

    def _write_data(self, config_map: dict[str, Any], key: str, value: str, namespace: str) -> None:
        """The run's ConfigMap with ``key`` set to ``value`` (what the watch keeps between its rounds)."""
        name = config_map["metadata"]["name"]
        data = {**config_map.get("data", {}), key: value}
        with self._api_errors(f"update ConfigMap {name}"):
            self._call("ConfigMap", "replace", name, namespace,
                       body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": config_map["metadata"], "data": data})

    def _end_job(self, job: dict[str, Any], now: float, namespace: str) -> None:
        """Fail ``job`` now as the Job controller does at a deadline: ``activeDeadlineSeconds`` set to its age.

        A merge patch of just that field (no resourceVersion): never in conflict with the Job controller's
        status writes. A Job gone meanwhile needs no ending.
        """
        name = job["metadata"]["name"]
        started = k8s_status.parse_time(job.get("status", {}).get("startTime")) or now
        with self._unless_gone(f"patch Job {name}"):
            self._call("Job", "patch", name, namespace, _content_type="application/merge-patch+json",
                       body={"spec": {"activeDeadlineSeconds": max(1, int(now - started))}})

    def describe(self, name: str) -> JobStatus | None:
        namespace = self._ns()
        jobs, pods = self._list("Job", namespace, name), self._list("Pod", namespace, name)
        status = k8s_status.job_status(name, jobs, pods)
        if status is None:
            return status
        try:
            config_map: dict[str, Any] | None = self._config_map(name, namespace)
        except LaunchError:
            config_map = None  # being deleted: status without what the ConfigMap holds
        run_config = _record(config_map, JOB_KEY, RunConfig)
        policy = k8s_status.job_policy(jobs[0])
        runs = k8s_status.runs_by_task(pods)
        reader = EventReader(k8s_status.event_token(jobs))
        events = {(role, index): self._recent_events(views, namespace, reader) or []
                  for (role, index), views in runs.items() if role.trains or role is RoleType.EVALUATOR}
        lead = events.get((policy.lead.role, policy.lead.index), [])
        start = seed(run_config) if run_config is not None else JobProgress()
        status.progress = fold(fold(start, lead, from_lead=True), events.get((RoleType.EVALUATOR, 0), []),
                               from_lead=False)
        status.tensorboard_dir = k8s_status.tensorboard_dir(jobs)
        record = _record(config_map, k8s_stall.STALL_KEY, k8s_stall.StallRecord)
        watching = (run_config is not None and run_config.lead_runs_entrypoint and reader.reads) or any(
            e.event in WATCHED_EVENTS or e.event in SIGNS_OF_LIFE for e in lead)
        status.stall = record.status if record is not None else StallStatus(watching=watching)
        if status.state is State.FAILED and record is not None and record.status.message.startswith("failed:"):
            status.message = "; ".join(filter(None, [record.status.message, status.message]))
        failures = _record(config_map, k8s_failures.FAILURES_KEY, k8s_failures.FailureRecord)
        if status.state is State.FAILED and failures is not None and failures.message:
            status.message = "; ".join(filter(None, [failures.message, status.message]))
        times = {naming.task_name(name, role, index): k8s_stall.step_times(found)
                 for (role, index), found in events.items() if role.trains}
        status.stragglers = stragglers(times)
        for task in status.tasks:
            task.step_time = times[task.name][-1] if times.get(task.name) else None
        return status

    def _recent_events(self, runs: list[k8s_status.PodView], namespace: str, reader: EventReader,
                       tail: int = PROGRESS_TAIL_LINES) -> list[Event] | None:
        """The events (of ``reader``'s run) among the last ``tail`` log lines of the latest of ``runs`` (none while
        it is pending or unreadable); None when those lines are all other output (the events are further back).
        The pod's log lines are the task's own: read without timestamps, nothing to strip."""
        if not runs or runs[-1].phase == "Pending":
            return []
        try:
            lines = list(self._log_lines(runs[-1].name, namespace, follow=False, tail=tail))
        except LaunchError:
            return []  # e.g. the container is not started yet or was replaced: status without its events
        events = [event for event in map(reader.parse, lines) if event is not None]
        return None if not events and len(lines) >= tail else events

    # --- logs ------------------------------------------------------------

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        namespace = self._ns()
        runs = k8s_status.runs_by_task(self._list("Pod", namespace, name))
        latest = {naming.task_name(name, role, index): runs[role, index][-1].name for role, index in _task_order(runs)}
        if task is not None:
            if task not in latest:
                known = ", ".join(latest) or "none has started yet"
                raise LaunchError(f"no pod for task {task!r} of cluster {name!r} (tasks: {known})")
            yield from self._log_lines(latest[task], namespace, follow)
            return
        if not follow:
            for task_name, pod in latest.items():
                yield from (f"{task_name} | {line}" for line in self._log_lines(pod, namespace, False))
            return
        yield from interleave({task_name: partial(self._log_lines, pod, namespace, True) for task_name, pod in latest.items()})

    def _log_lines(self, pod: str, namespace: str, follow: bool, tail: int | None = None) -> Iterator[str]:
        with self._api_errors(f"read logs of {pod}"):
            response = self._apis["core"].read_namespaced_pod_log(
                pod, namespace, container=CONTAINER, follow=follow, tail_lines=tail, _preload_content=False
            )
        try:
            yield from iter_lines(response.stream(4096))
        finally:
            response.release_conn()

    # --- tensorboard -------------------------------------------------------

    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        """A TensorBoard Deployment reached through a port-forward; TensorBoard here when every log dir is a bucket.

        One run: the objects its ConfigMap stores. Several (a name given
        twice counts once): one ``tensorboard.shared_board`` of the runs in
        name order (the same board whatever order they are given in), owned
        by every run's ConfigMap. ``LaunchError`` for a run not in the
        backend's namespace or without summaries.
        """
        namespace = self._ns()
        runs = sorted(set(names))
        configs = {name: self._config_map(name, namespace) for name in runs}
        dirs = {name: log_dir_of(name, RunConfig.model_validate_json(c["data"][JOB_KEY]).tensorboard_dir)
                for name, c in configs.items()}
        if all(is_object_store(d) for d in dirs.values()):
            return serve_locally(dirs, host, port)
        owners = [_owner(c) for c in configs.values()]
        first = stored_board(runs[0], configs[runs[0]]["data"])
        if len(runs) == 1:
            return self._board(first, owners, namespace, host, port)
        board = shared_board([BoardRun.stored(name, c["data"]) for name, c in configs.items()], first)
        return self._board(board, owners, namespace, host, port)

    def _config_map(self, name: str, namespace: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        config_map = naming.config_map_name(name)
        with self._api_errors(f"read ConfigMap {config_map}"):
            try:
                return self._call("ConfigMap", "read", config_map, namespace)
            except ApiException as exc:
                if exc.status == 404:
                    raise LaunchError(f"no cluster named {name!r} in namespace {namespace!r}") from None
                raise

    @contextmanager
    def _board(self, board: list[dict[str, Any]], owners: list[dict[str, Any]], namespace: str, host: str,
               port: int) -> Iterator[Board]:
        """Apply a TensorBoard's objects (Deployment first) owned by ``owners``, forward to its ready pod, delete them after."""
        applied: list[dict[str, Any]] = []
        try:
            for obj in board:
                obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace, "ownerReferences": owners}}
                self._apply(obj, namespace)
                applied.append(obj)
            deployment = applied[0]
            pod = self._ready_board_pod(deployment["metadata"]["name"], deployment["spec"]["selector"]["matchLabels"], namespace)
            with PortForwarder(partial(self._open_forward, pod, namespace), PORT, host, port) as forward:
                address = url(host, port)
                wait_until_serving(address, forward.running, lambda: f"pod {pod} does not answer on port {PORT}")
                yield Board(address, forward.running)
        finally:
            for obj in reversed(applied):
                self._delete(obj["kind"], obj["metadata"]["name"], namespace)

    def _open_forward(self, pod: str, namespace: str) -> Any:
        from kubernetes.stream import portforward

        with self._stream_lock:
            return portforward(self._apis["core"].connect_get_namespaced_pod_portforward, pod, namespace, ports=str(PORT))

    def _ready_board_pod(self, deployment: str, labels: dict[str, str], namespace: str) -> str:
        """The name of a ready pod (one with ``labels``) of the TensorBoard Deployment, once it has one."""
        ends = time.monotonic() + BOARD_READY_SECONDS
        selector = ",".join(f"{key}={value}" for key, value in labels.items())
        waiting = "no pod yet"
        while time.monotonic() < ends:
            with self._api_errors(f"read TensorBoard {deployment}"):
                ready = (self._call("Deployment", "read", deployment, namespace).get("status") or {}).get("readyReplicas")
                pods = self._call("Pod", "list", namespace, label_selector=selector).get("items", [])
            for pod in pods if ready else []:
                conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
                if conditions.get("Ready") == "True" and not pod["metadata"].get("deletionTimestamp"):
                    return str(pod["metadata"]["name"])
            waiting = k8s_status.waiting_reason(pods)
            time.sleep(1.0)
        raise LaunchError(f"TensorBoard Deployment {deployment} had no ready pod after {BOARD_READY_SECONDS:.0f}s: {waiting}")

    # --- cancel ----------------------------------------------------------

    def cancel(self, name: str, volumes: bool = False) -> None:
        """Delete the cluster's objects, Jobs first (Foreground: a Job is gone only after its pods).

        Every TensorBoard showing the run (its own, or one shared with other
        runs) that a killed ``tensorboard`` command left goes first.
        """
        namespace = self._ns()
        owner = naming.config_map_name(name)
        for kind in _BOARD:
            for obj in self._select(kind, namespace, f"{naming.LABEL_MANAGED}={naming.MANAGER}"):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("kind") == "ConfigMap" and ref.get("name") == owner for ref in refs):
                    self._delete(kind, obj["metadata"]["name"], namespace)
        for kind in reversed(_APPLIED):
            if kind in _KEPT and not volumes:
                continue
            for obj in self._list(kind, namespace, name):
                if kind not in _KEPT or checkpoints.created_for(obj["metadata"].get("labels"), name):
                    self._delete(kind, obj["metadata"]["name"], namespace)
        harness.StateDir.of(self.kind, name).remove()  # the stall's stacks this machine's watch kept

    # --- API helpers -----------------------------------------------------

    def _ns(self) -> str:
        return self.namespace or DEFAULT_NAMESPACE

    def _method(self, kind: str, verb: str) -> Callable[..., Any]:
        spec = _KINDS[kind]
        return getattr(self._apis[spec.api], f"{verb}_namespaced_{spec.suffix}")

    def _call(self, kind: str, verb: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One API call, answered as JSON (no model deserialization)."""
        response = self._method(kind, verb)(*args, _preload_content=False, **kwargs)
        try:
            return json.loads(response.data or b"{}")
        finally:
            response.release_conn()

    def _list(self, kind: str, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """The objects of ``cluster`` that tfcluster made (both labels: a user's object naming the cluster is not)."""
        return self._select(kind, namespace, f"{naming.LABEL_MANAGED}={naming.MANAGER},{naming.LABEL_CLUSTER}={cluster}")

    def _select(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        with self._api_errors(f"list {kind}s"):
            return self._call(kind, "list", namespace, label_selector=selector).get("items", [])

    def _delete(self, kind: str, name: str, namespace: str) -> None:
        propagation = "Foreground" if kind == "Job" else "Background"
        with self._unless_gone(f"delete {kind} {name}"):
            self._call(kind, "delete", name, namespace, propagation_policy=propagation)

    @contextmanager
    def _unless_gone(self, action: str) -> Iterator[None]:
        """``_api_errors`` for a change to an object that may be gone meanwhile: a 404 needs nothing done."""
        from kubernetes.client.exceptions import ApiException

        with self._api_errors(action):
            try:
                yield
            except ApiException as exc:
                if exc.status != 404:
                    raise

    @contextmanager
    def _api_errors(self, action: str) -> Iterator[None]:
        """Turns client errors into ``LaunchError`` naming the action, the API server and its answer."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            raise LaunchError(f"cannot {action}: {_api_reason(exc)}") from None
        except HTTPError as exc:
            raise LaunchError(f"cannot {action}: Kubernetes API at {self._host} unreachable ({exc.__class__.__name__})") from None


RecordT = TypeVar("RecordT", bound=BaseModel)


def _record(config_map: dict[str, Any] | None, key: str, model: type[RecordT]) -> RecordT | None:
    """The ``model`` kept under ``key`` in the run's ConfigMap: its ``RunConfig`` (``JOB_KEY``), the stall the watch
    last recorded (``k8s_stall.STALL_KEY``), what it judged of the failure rules (``k8s_failures.FAILURES_KEY``);
    None without one (an object of an older launch, or being deleted)."""
    try:
        return None if config_map is None else model.model_validate_json(config_map["data"][key])
    except (KeyError, ValidationError):
        return None


def _owner(config_map: dict[str, Any]) -> dict[str, Any]:
    """An owner reference to a run's ConfigMap: what it owns goes with the run (the garbage collector)."""
    meta = config_map["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}


def _task_order(runs: dict[tuple[RoleType, int], Any]) -> list[tuple[RoleType, int]]:
    """Task keys in plan order: chief, workers, ps, evaluator, by index."""
    return sorted(runs, key=lambda key: (key[0].order, key[1]))


def _api_reason(exc: Any) -> str:
    try:
        body = json.loads(exc.body)
        return f"{exc.status} {body.get('reason', '')}: {body.get('message', '')}".strip()
    except (TypeError, ValueError):
        return f"{exc.status} {exc.reason}"

