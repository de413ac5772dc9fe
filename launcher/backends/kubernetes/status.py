"""What a run's Jobs and Pods (as API JSON) say: Job conditions, a task's pods, the supervisor pod's state. Pure.

Contract: every function takes what the API returned for one run (objects carrying the ``launcher.plan.naming``
labels) and decides without I/O; the run's status itself is what its supervisor publishes (``cluster_state``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.plan import naming
from launcher.protocol import env as task_env
from launcher.spec.models import RoleType
from launcher.supervision.status import JobStatus, State, SupervisorState

Obj = dict[str, Any]

#: The label the Job controller puts on its pods: the uid of the Job that made them.
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
#: Job conditions that mean the Job is over (``*Target``/``SuccessCriteriaMet``: decided, pods being stopped).
FAILED_CONDITIONS = ("Failed", "FailureTarget")
COMPLETE_CONDITIONS = ("Complete", "SuccessCriteriaMet")


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
    """Why none of ``pods`` runs yet (a container's waiting reason, e.g. ImagePullBackOff, or why the scheduler does
    not place it, ``PodView.unscheduled``), for messages."""
    for pod in pods:
        for container in pod.get("status", {}).get("containerStatuses", []):
            waiting = container.get("state", {}).get("waiting")
            if waiting:
                return f"{pod['metadata']['name']}: {waiting.get('reason', '')} {waiting.get('message', '')}".strip()
        unscheduled = PodView(pod).unscheduled()
        if unscheduled:
            return f"{pod['metadata']['name']}: {unscheduled}"
    return f"{len(pods)} pod(s), none ready" if pods else "no pod yet"


#: Waiting reasons of a container that will not start without a change (its pod stays Pending for ever).
CANNOT_START = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull",
                          "CreateContainerConfigError", "CreateContainerError"})


def supervisor_state(jobs: list[Obj], pods: list[Obj]) -> tuple[SupervisorState | None, str]:
    """The in-cluster supervisor of a run from its Job and pods, and why it is not alive: None without a Job;
    exited once its Job completed; lost when its Job failed or is being deleted, or its pod cannot start (a pull
    back-off); alive while a pod runs; starting while one exists but does not run yet, or while none does and its
    Job makes the next (a supervisor that moved: its pod deleted or drained; one that failed, after a back-off)."""
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
        if _deleting(jobs[0]):
            return SupervisorState.LOST, "its Job is being deleted"
        return SupervisorState.STARTING, "no supervisor pod yet: its Job makes the next"
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
        return int(self.pod["metadata"]["labels"][naming.LABEL_INDEX])

    @property
    def phase(self) -> str:
        return self.pod.get("status", {}).get("phase", "Pending")

    @property
    def created(self) -> str:
        return self.pod["metadata"].get("creationTimestamp", "")

    @property
    def deleting(self) -> bool:
        return _deleting(self.pod)

    def container(self) -> Obj:
        for status in self.pod.get("status", {}).get("containerStatuses") or []:
            if status.get("name") == CONTAINER:
                return status
        return {}

    def terminated(self) -> Obj | None:
        return (self.container().get("state") or {}).get("terminated")

    def message(self) -> str:
        status = self.container()
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            return " ".join(filter(None, [waiting.get("reason"), waiting.get("message")]))
        terminated = self.terminated()
        if terminated:
            return " ".join(filter(None, [terminated.get("reason"), terminated.get("message")]))
        return self.pod.get("status", {}).get("reason") or self.unscheduled()

    def scheduled(self) -> bool:
        """Whether the scheduler bound the pod to a node (its ``PodScheduled`` condition is True)."""
        return any(cond.get("type") == "PodScheduled" and cond.get("status") == "True"
                   for cond in self.pod.get("status", {}).get("conditions") or [])

    def unscheduled(self) -> str:
        """Why the scheduler has not placed the pod (its ``PodScheduled`` condition, e.g. ``Unschedulable: 0/3
        nodes are available: insufficient cpu``), or "": the pod's own status says it, no Event is needed."""
        for cond in self.pod.get("status", {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return ": ".join(filter(None, [cond.get("reason"), cond.get("message")]))
        return ""


#: The field selector of the pods that wait (``pending`` reads no other: a run's Running pods cost ``status`` nothing).
WAITING = "status.phase=Pending"


def latest_waiting(waiting: Iterable[Obj], pods: Iterable[Obj]) -> list[Obj]:
    """Of ``waiting`` (the run's pods listed by ``WAITING``), those that are their task's newest pod among ``pods``
    (every pod of the run, its metadata enough): a pod that still waits while a newer one of its task replaced it
    does not say what the task waits for (``pending`` reads the newest)."""
    newest = {views[-1].name for views in runs_by_task(pods).values()}
    return [pod for pod in waiting if pod["metadata"]["name"] in newest]


def unowned(jobs: Iterable[Obj], pods: Iterable[Obj]) -> bool:
    """Whether one of ``jobs`` has none of ``pods`` (metadata enough for both): only then can one be ``podless``."""
    owners = {pod["metadata"].get("labels", {}).get(CONTROLLER_UID) for pod in pods}
    return any(job["metadata"]["uid"] not in owners for job in jobs)


def podless(jobs: Iterable[Obj], pods: Iterable[Obj]) -> list[Obj]:
    """The task Jobs of ``jobs`` that were started (not suspended, ``startTime``) and are not over, but have no pod:
    their controller could not create it (or has not yet)."""
    owners = {pod["metadata"].get("labels", {}).get(CONTROLLER_UID) for pod in pods}
    return [job for job in jobs if not job["spec"].get("suspend") and job.get("status", {}).get("startTime")
            and not job_failed(job) and not job_complete(job) and job["metadata"]["uid"] not in owners]


def pending(status: JobStatus, pods: Iterable[Obj], refused: Mapping[str, str] | None = None) -> JobStatus:
    """``status`` with each task whose latest pod waits (not scheduled, its image not pulled), or whose pod the API
    server refuses to create (``refused``: task -> its answer, ``pod_admission``), ``pending`` and saying why; a run
    its supervisor runs (or restarts) whose task the scheduler cannot place (``PodScheduled`` False: no node has the
    room, now or ever) or whose pod cannot be created is itself ``pending`` with that reason: it waits, nothing
    trains."""
    latest = {naming.task_name(status.name, role, index): views[-1]
              for (role, index), views in runs_by_task(pods).items() if views[-1].phase == "Pending"}
    why = {task: f"cannot be placed: {view.unscheduled()}" for task, view in latest.items() if view.unscheduled()}
    why.update({task: f"its pod cannot be created: {answer}" for task, answer in (refused or {}).items()})
    waits = {task: view.message() for task, view in latest.items() if view.message()}
    waits.update({task: reason for task, reason in why.items() if task not in waits})
    tasks = [replace(task, message=f"pending: {waits[task.name]}",
                     state=State.PENDING if task.state is State.RUNNING else task.state)
             if task.name in waits else task
             for task in status.tasks]
    status = replace(status, tasks=tasks)
    if why and status.state in (State.RUNNING, State.RESTARTING):
        task = next(iter(why))
        return replace(status, state=State.PENDING, message=f"pending: {task} {why[task]}")
    return status


def oldest_first(pods: Iterable[Obj]) -> list[PodView]:
    """``pods`` in the order they were created (by name within a second: the API's timestamps have no more)."""
    return sorted(map(PodView, pods), key=lambda view: (view.created, view.name))


def runs_by_task(pods: Iterable[Obj]) -> dict[tuple[RoleType, int], list[PodView]]:
    """Every pod of each task (role, index), oldest first."""
    runs: dict[tuple[RoleType, int], list[PodView]] = {}
    for view in oldest_first(pods):
        runs.setdefault((view.role, view.index), []).append(view)
    return runs
