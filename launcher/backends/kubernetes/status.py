"""What a cluster's Jobs and Pods (as API JSON) mean: job status, gang restarts, leftovers. Pure, no client.

Contract: every function takes the lists the API returned for one cluster
(objects carrying the ``launcher.plan.naming`` labels, Jobs carrying the
plan's ``JobPolicy`` as an annotation) and decides without I/O;
``launcher.backends.kubernetes.backend`` fetches and acts. Timestamps are
RFC 3339 strings as the API writes them; ``now`` is unix seconds.

Overall state: success is decided by the Jobs of the policy's
``success_roles``, before failures, so a worker that crashes after the chief
exported the model does not fail the run. A failed chief/worker/ps Job
fails the run; an evaluator never decides it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from launcher.backends.kubernetes.manifests import ANNOTATION_POLICY, CONTAINER, INDEX_KEY
from launcher.plan import naming
from launcher.plan.policy import JobPolicy
from launcher.plan.targets import BackendKind
from launcher.protocol import env as task_env
from launcher.spec.models import RoleType, Strategy
from launcher.supervision.status import JobStatus, State, SupervisorState, TaskStatus

Obj = dict[str, Any]

#: Set by the Job controller on pods of Jobs with ``backoffLimitPerIndex``.
FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
#: Job conditions that mean the Job is over (``*Target``/``SuccessCriteriaMet``: decided, pods being stopped).
FAILED_CONDITIONS = ("Failed", "FailureTarget")
COMPLETE_CONDITIONS = ("Complete", "SuccessCriteriaMet")


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _condition(job: Obj, types: tuple[str, ...]) -> Obj | None:
    """The first of ``types`` the Job has (true): the final condition before the interim one that precedes it."""
    conditions = job.get("status", {}).get("conditions") or []
    for wanted in types:
        for cond in conditions:
            if cond.get("type") == wanted and cond.get("status") == "True":
                return cond
    return None


def job_failed(job: Obj) -> Obj | None:
    return _condition(job, FAILED_CONDITIONS)


def job_complete(job: Obj) -> Obj | None:
    return _condition(job, COMPLETE_CONDITIONS)


def job_role(job: Obj) -> RoleType:
    return RoleType(job["metadata"]["labels"][naming.LABEL_ROLE])


def job_policy(job: Obj) -> JobPolicy:
    """The plan's policy, as the Job carries it."""
    return JobPolicy.model_validate_json(job["metadata"]["annotations"][ANNOTATION_POLICY])


def _job_env(jobs: list[Obj], name: str) -> str | None:
    """The literal value of variable ``name`` in a Job's container (the same in every Job of a run), or None."""
    for job in jobs:
        for container in job["spec"]["template"]["spec"]["containers"]:
            for var in container.get("env", []):
                if var["name"] == name and "value" in var:
                    return str(var["value"])
    return None


def tensorboard_dir(jobs: list[Obj]) -> str | None:
    """The run's log dir as its pods see it (``TFCLUSTER_TENSORBOARD_DIR`` of a Job's container), or None."""
    return _job_env(jobs, task_env.TENSORBOARD_DIR)


def event_token(jobs: list[Obj]) -> str:
    """The token the run's pods were given (``TFCLUSTER_EVENT_TOKEN``), the only one their events are read with;
    empty when the Jobs have none (then no event is read)."""
    return _job_env(jobs, task_env.EVENT_TOKEN) or ""


def waiting_reason(pods: list[Obj]) -> str:
    """Why none of ``pods`` runs yet (a container's waiting reason, e.g. ImagePullBackOff), for messages."""
    for pod in pods:
        for container in pod.get("status", {}).get("containerStatuses", []):
            waiting = container.get("state", {}).get("waiting")
            if waiting:
                return f"{pod['metadata']['name']}: {waiting.get('reason', '')} {waiting.get('message', '')}".strip()
    return f"{len(pods)} pod(s), none ready" if pods else "no pod yet"


#: Waiting reasons of a container that will not start without a change (its pod stays Pending for ever).
CANNOT_START = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull",
                          "CreateContainerConfigError", "CreateContainerError"})


def supervisor_state(jobs: list[Obj], pods: list[Obj]) -> tuple[SupervisorState | None, str]:
    """The in-cluster supervisor of a run from its Job and pods, and why it is not alive: None without a Job;
    exited once its Job completed; lost when its Job failed, it has no pod, or its pod cannot start (a pull
    back-off); alive while a pod runs; starting while one exists but does not run yet."""
    if not jobs:
        return None, ""
    if job_complete(jobs[0]):
        return SupervisorState.EXITED, ""
    failed = job_failed(jobs[0])
    if failed:
        return SupervisorState.LOST, " ".join(filter(None, ["its Job failed:", failed.get("reason"),
                                                            failed.get("message")]))
    live = [p for p in pods if not _deleting(p) and p.get("status", {}).get("phase", "Pending") in ("Pending", "Running")]
    if any(p.get("status", {}).get("phase") == "Running" for p in live):
        return SupervisorState.ALIVE, ""
    if not live:
        return SupervisorState.LOST, "no supervisor pod"
    reasons = {(c.get("state") or {}).get("waiting", {}).get("reason") for p in live
               for c in p.get("status", {}).get("containerStatuses", [])}
    if reasons & CANNOT_START:
        return SupervisorState.LOST, f"its pod cannot start: {waiting_reason(live)}"
    return SupervisorState.STARTING, waiting_reason(live)


def _deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


@dataclass(frozen=True)
class PodView:
    """One pod as a task run: its task, phase and container outcome."""

    pod: Obj

    @property
    def name(self) -> str:
        return self.pod["metadata"]["name"]

    @property
    def role(self) -> RoleType:
        return RoleType(self.pod["metadata"]["labels"][naming.LABEL_ROLE])

    @property
    def index(self) -> int:
        meta = self.pod["metadata"]
        return int((meta.get("labels") or {}).get(INDEX_KEY) or (meta.get("annotations") or {})[INDEX_KEY])

    @property
    def phase(self) -> str:
        return self.pod.get("status", {}).get("phase", "Pending")

    @property
    def created(self) -> str:
        return self.pod["metadata"].get("creationTimestamp", "")

    @property
    def started(self) -> float | None:
        return parse_time(self.pod.get("status", {}).get("startTime"))

    @property
    def deleting(self) -> bool:
        return _deleting(self.pod)

    def container(self) -> Obj:
        for status in self.pod.get("status", {}).get("containerStatuses") or []:
            if status.get("name") == CONTAINER:
                return status
        return {}

    def terminated(self) -> Obj | None:
        status = self.container()
        return (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")

    def finished(self) -> float | None:
        terminated = self.terminated()
        return parse_time(terminated.get("finishedAt")) if terminated else None

    def failure_count(self) -> int | None:
        value = (self.pod["metadata"].get("annotations") or {}).get(FAILURE_COUNT_KEY)
        return int(value) if value is not None else None

    def message(self) -> str:
        status = self.container()
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            return " ".join(filter(None, [waiting.get("reason"), waiting.get("message")]))
        terminated = self.terminated()
        if terminated:
            return " ".join(filter(None, [terminated.get("reason"), terminated.get("message")]))
        return self.pod.get("status", {}).get("reason") or self.unscheduled()

    def unscheduled(self) -> str:
        """Why the scheduler has not placed the pod (its ``PodScheduled`` condition, e.g. ``Unschedulable: 0/3
        nodes are available: insufficient cpu``), or "": the pod's own status says it, no Event is needed."""
        for cond in self.pod.get("status", {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return ": ".join(filter(None, [cond.get("reason"), cond.get("message")]))
        return ""


def runs_by_task(pods: Iterable[Obj]) -> dict[tuple[RoleType, int], list[PodView]]:
    """Every pod of each task (role, index), oldest first (by the Job controller's failure count, then age)."""
    runs: dict[tuple[RoleType, int], list[PodView]] = {}
    for pod in pods:
        view = PodView(pod)
        runs.setdefault((view.role, view.index), []).append(view)
    for views in runs.values():
        views.sort(key=lambda v: (v.failure_count() or 0, v.created, v.name))
    return runs


def task_status(cluster: str, role: RoleType, index: int, runs: list[PodView], job_over: bool) -> TaskStatus:
    name = naming.task_name(cluster, role, index)
    if not runs:
        return TaskStatus(name, State.PENDING)
    latest = runs[-1]
    restarts = latest.failure_count()
    restarts = len(runs) - 1 if restarts is None else restarts
    # Replaced without counting (an Ignore rule: preempted); pods deleted since are not seen.
    preemptions = max(len(runs) - 1 - restarts, 0)
    terminated = latest.terminated()
    exit_code = terminated.get("exitCode") if terminated else None
    if latest.phase == "Succeeded":
        state = State.SUCCEEDED
    elif latest.phase == "Failed":
        state = State.FAILED if job_over else State.RESTARTING
    elif latest.deleting:
        state = State.RESTARTING
    elif latest.phase == "Running":
        state = State.RUNNING
    else:
        state = State.RESTARTING if restarts else State.PENDING
    return TaskStatus(
        name, state, restarts=restarts, exit_code=exit_code, message=latest.message(), preemptions=preemptions
    )


def job_status(cluster: str, jobs: list[Obj], pods: list[Obj]) -> JobStatus | None:
    """The cluster's status from its Jobs and Pods; None when it has no Jobs (never launched, or down)."""
    if not jobs:
        return None
    jobs = sorted(jobs, key=_role_order)
    by_role = {job_role(j): j for j in jobs}
    runs = runs_by_task(pods)
    tasks, training = [], []
    for job in jobs:
        role = job_role(job)
        over = bool(job_failed(job) or job_complete(job))
        for index in range(job["spec"].get("completions", 1)):
            task = task_status(cluster, role, index, runs.get((role, index), []), over)
            tasks.append(task)
            if role.trains:
                training.append(task)
    restarts = max((t.restarts for t in training), default=0)
    preemptions = max((t.preemptions for t in training), default=0)
    conditions = "; ".join(_describe_job(j) for j in jobs if _describe_job(j))

    def status(state: State, message: str = conditions) -> JobStatus:
        return JobStatus(
            cluster, BackendKind.K8S, state, tasks, message=message, restarts=restarts, preemptions=preemptions
        )

    if all(_deleting(j) for j in jobs):
        return status(State.CANCELLED, "being deleted")
    deciders = [by_role[r] for r in job_policy(jobs[0]).success_roles if r in by_role]
    if deciders and all(job_complete(j) for j in deciders):
        return status(State.SUCCEEDED)
    if any(job_failed(job) for role, job in by_role.items() if role.trains):
        return status(State.FAILED)
    if any(t.state is State.RESTARTING for t in training):
        return status(State.RESTARTING)
    if training and all(t.state in (State.RUNNING, State.SUCCEEDED) for t in training):
        return status(State.RUNNING)
    return status(State.PENDING)


def _role_order(job: Obj) -> int:
    return job_role(job).order


def _describe_job(job: Obj) -> str:
    cond = job_failed(job) or job_complete(job)
    if cond is None:
        return ""
    detail = ": ".join(filter(None, [cond.get("reason"), cond.get("message")]))
    return f"{job['metadata']['name']}: {cond['type']}" + (f" ({detail})" if detail else "")


def stale_gang_pods(jobs: list[Obj], pods: list[Obj], now: float, grace: float) -> list[str]:
    """MultiWorkerMirrored pods that outlived a failed peer by ``grace`` seconds: to delete so their Job recreates them.

    A lost collective never recovers, and the peer's replacement cannot join
    the old group: every chief/worker of the gang that lost a member must
    start again too (``Strategy`` docs, verified in the local backend).
    Normally the survivors fail by themselves within seconds and the Job
    controller replaces them; this catches the ones that hang.

    Staleness is judged by generation (see ``gang_round_start``): only a pod
    started before the latest round began is stale, never a replacement
    started after it, even when a survivor of that round fails later.
    """
    policy = job_policy(jobs[0]) if jobs else None  # the same plan's policy on every Job
    gang_roles = {
        job_role(j)
        for j in jobs
        if policy is not None and policy.strategy is Strategy.MULTI_WORKER_MIRRORED
        and not policy.restarts_alone(job_role(j))
        and job_role(j) in (RoleType.CHIEF, RoleType.WORKER)
        and not (job_failed(j) or job_complete(j) or _deleting(j))
    }
    views = [PodView(p) for p in pods if PodView(p).role in gang_roles]
    round_start = gang_round_start(views)
    if round_start is None or now - round_start < grace:
        return []
    return sorted(
        v.name
        for v in views
        if v.phase == "Running" and not v.deleting and v.started is not None and v.started < round_start
    )


def gang_round_start(views: list[PodView]) -> float | None:
    """When the gang last lost a member: the start of the latest restart round, None if it never did.

    Failures are taken in time order. A failed pod that started at or after
    the current round's start (or the first failure) is a member of the
    current gang and begins a new round; one that started before it is a
    survivor of that round exiting (exit 175, or deleted by ``watch_round``)
    and only ends the old gang. Pods without a start time use their
    creation time.
    """
    failures = sorted(
        (finished, v.started or parse_time(v.created) or 0.0)
        for v in views
        if v.phase == "Failed" and (finished := v.finished()) is not None
    )
    round_start: float | None = None
    for finished, started in failures:
        if round_start is None or started >= round_start:
            round_start = finished
    return round_start


def leftover_jobs(jobs: list[Obj], status: JobStatus, now: float, linger: float | None = None) -> list[str]:
    """Jobs still running after the run ended: to delete.

    After success the others get ``linger`` seconds (default: the policy's
    ``linger_seconds``) to exit by themselves (ps/worker servers see the
    completion marker; the evaluator finishes its last evaluation); after a
    failure nothing is worth waiting for.
    """
    if status.state is State.SUCCEEDED:
        if linger is None:
            linger = job_policy(jobs[0]).linger_seconds if jobs else 0.0
        done = [parse_time(j.get("status", {}).get("completionTime")) for j in jobs if job_complete(j)]
        finished = max((d for d in done if d is not None), default=now)
        if now - finished < linger:
            return []
    elif status.state is not State.FAILED:
        return []
    running = [j for j in jobs if not (job_complete(j) or job_failed(j) or _deleting(j))]
    return [j["metadata"]["name"] for j in sorted(running, key=_role_order)]
