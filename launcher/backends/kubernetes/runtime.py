"""The Kubernetes ``Runtime``: the one ``Supervisor`` runs each task as a Job of its own, through the API.

Contract: a task is the Job named after it (``manifests.task_job``: one pod, ``backoffLimit: 0``, rendered
suspended), so Kubernetes never restarts a task by itself: the supervisor decides. Restarts happen *in place*
where the task's pod is still there: its agent (``launcher.worker.agent``, held: it outlives a run) is told to
stop the run (SIGTERM, SIGKILL after the grace) and to start the next one in the same pod (its standby, TensorFlow
imported: no new pod, no scheduling, the same name, IP and DNS); a pod that is gone, ends, or whose agent does not
answer is replaced as before. So ``start`` lets a suspended Job run, starts the next run in a pod whose agent
answers (``agent_control.Start``), or else replaces a Job that ran by a fresh copy of it (``fresh_copy``: deleted,
then created again as it was applied); ``poll`` reads the end of the current run from the agent's line in the
pod's log (``agent_control.exit_line``; asked of the agent when the log stream broke), else the exit code of the
pod of the Job (128+9 when that pod or Job is gone); a pod Kubernetes disrupted (``DisruptionTarget``: preempted
by the scheduler for a pod of a higher priority, evicted, its node drained, tainted or lost) is a preemption, 143,
whatever it ended with, also when it was gone before its end was read (the disruption seen while it ended,
``_disrupted``): the supervisor restarts its group within ``max_preemptions``, never spending ``max_restarts``;
``stop`` tells each task's agent to stop its run, all at once, and deletes the pods of those that do not answer,
with the grace, returning once every run ended (a ``LaunchError`` if pods still run ``STOP_SLACK_SECONDS`` after the
grace and after the last pod seen to end: stuck; many ending one by one are waited for); ``close`` tells each held
agent to quit (its pod ends as its last run did). What ``poll`` and ``stop`` read of the run's pods and Jobs is the
run's ``watched.RunObjects`` (one LIST, then a WATCH, per kind; no request per task or per round): every answer it gives stays true (an ended pod
stays ended, a failed Job failed), and an absence is asked of the API (a GET of the Job; the pods of a Job seen
failed with none seen, as the two kinds are watched apart) before it is taken as a lost run; while the cache is
stale ``poll`` raises ``backoff.NotNow`` (nothing decided: the supervisor backs its rounds off), past
``watched.STALE_SECONDS`` ``watched.Unreachable`` (an engine fault). ``output`` follows each pod's log in a thread of its own (one
pod's log carries all the runs made in it); ``read_stacks`` asks the stack endpoint of the task's agent (its
program's parent, ``launcher.worker.agent``: py-spy) at its pod's IP (``launcher.protocol.stack_endpoint``, with
the run's event token; from outside the cluster, ``in_cluster`` False, through a port-forward; the agent's other
requests likewise): no ``pods/exec``, which the supervisor pod has no right to. It reads every task's program so
(``ReadsEveryStack``): ``dump_stacks`` is never asked of it. ``placing`` (``Placing``) is True while a started
task's pod is not created or not bound yet (a gang waiting for room; a run restarted in place is in a bound pod):
the stall watchdog counts no silence meanwhile. API faults are raised as the client raises them, so the supervisor
retries them as engine faults; a refusal (403, 422) is a ``LaunchError``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from launcher.backends.agent_log import RunLog
from launcher.backends.kubernetes import gang, pod_io
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.status import CONTROLLER_UID
from launcher.backends.kubernetes.watched import RunObjects, Snapshot
from launcher.backends.pyspy import say_none
from launcher.errors import LaunchError
from launcher.plan.planner import Plan, Task
from launcher.protocol import agent_control, endpoint_wire, stack_endpoint
from launcher.protocol.exitcodes import LOST_EXIT, ExitCode

#: How often ``stop`` and ``start`` look again at what they wait for.
LISTING_SECONDS = 0.2
#: How long ``stop`` waits beyond the grace, and beyond the last pod it saw end after it, for the kubelets to end the
#: containers (and the pods to go): many pods may end one by one (a slow kubelet or API server), none may stay stuck.
STOP_SLACK_SECONDS = 30.0
#: How long ``start`` waits for a replaced Job's name to be free.
REPLACE_SECONDS = 30.0
#: How long ``output`` waits for the log of an ended pod to be read to its end.
DRAIN_SECONDS = 10.0

#: What the Job controller and the API server add to a Job that a copy made to be created again must not carry.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")
_CONTROLLER_LABELS = (CONTROLLER_UID, "controller-uid", "batch.kubernetes.io/job-name", "job-name")


def fresh_copy(job: Obj) -> Obj:
    """``job`` as it was applied, to be created again: without its status, the server's fields, and the selector
    and pod labels the Job controller added (it adds them anew), and running (not suspended)."""
    metadata = {k: v for k, v in job["metadata"].items() if k not in _SERVER_FIELDS}
    spec = {k: v for k, v in job["spec"].items() if k not in ("selector", "manualSelector")}
    template = dict(spec["template"])
    labels = {k: v for k, v in template.get("metadata", {}).get("labels", {}).items() if k not in _CONTROLLER_LABELS}
    template["metadata"] = {**template.get("metadata", {}), "labels": labels}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {**spec, "suspend": False, "template": template}}


class KeptJobs:
    """Each task's Job as it was applied (``fresh_copy``), kept to create it again should the Job be gone (its TTL
    after it finished), as compact JSON: about 3 kB a Job, where the parsed copy held about 20 KiB of Python objects
    (17 MiB more at 1,000 tasks). ``copy`` parses a new one each time: the caller may change it."""

    def __init__(self) -> None:
        self._json: dict[str, bytes] = {}

    def keep(self, name: str, job: Obj) -> None:
        self._json[name] = json.dumps(fresh_copy(job), separators=(",", ":")).encode()

    def copy(self, name: str) -> Obj | None:
        kept = self._json.get(name)
        return None if kept is None else json.loads(kept)


def exit_of(pod: Obj) -> int | None:
    """The exit code of ``pod``'s task container once it ended; LOST_EXIT for a pod that failed without one
    (evicted, its node lost); None while it is pending or runs."""
    terminated = k8s_status.PodView(pod).terminated()
    if terminated is not None:
        return int(terminated.get("exitCode", LOST_EXIT))
    if pod.get("status", {}).get("phase") in ("Failed", "Succeeded"):
        return LOST_EXIT
    return None


def _disruption(pod: Obj) -> str:
    """Why Kubernetes disrupted ``pod`` (its ``DisruptionTarget`` condition's reason: ``PreemptionByScheduler``,
    ``EvictionByEvictionAPI`` (a drain), ``DeletionByTaintManager``, ``DeletionByPodGC`` (its node lost),
    ``TerminationByKubelet`` (node pressure)), or "" when it did not."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return cond.get("reason") or "DisruptionTarget"
    return ""


def _failed_by_disruption(failed: Obj | None) -> bool:
    """Whether a task Job's ``Failed`` condition is its ``manifests.DISRUPTED`` rule's: its pod was disrupted."""
    return failed is not None and failed.get("reason") == "PodFailurePolicy" and \
        "condition DisruptionTarget" in (failed.get("message") or "")


class _Follower:
    """One pod's log, read in a thread into a ``RunLog`` (its lines ended once the log ended, or the pod is gone)."""

    def __init__(self, api: KubeApi, pod: str, namespace: str, read_pod: Callable[[], Obj | None], token: str):
        self.pod = pod
        self.log = RunLog(token)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._follow, args=(api, namespace, read_pod), daemon=True)
        self._thread.start()

    def _follow(self, api: KubeApi, namespace: str, read_pod: Callable[[], Obj | None]) -> None:
        try:
            for line in pod_io.followed_once_started(api, self.pod, namespace, read_pod, self._stopped.wait):
                if not self.log.put(line) or self._stopped.is_set():
                    return
        except Exception:  # noqa: BLE001 - a broken stream just ends: the next poll meets the fault itself
            return
        finally:
            self.log.lines.end()

    @property
    def following(self) -> bool:
        return self._thread.is_alive()

    def drain(self, wait: float = 0.0) -> list[str]:
        """The lines read so far (a bounded batch); with ``wait``, first up to that long for the log to end or
        the queue to fill."""
        return self.log.lines.take(wait)

    def stop(self) -> None:
        self._stopped.set()
        self.log.lines.abandon()


class KubernetesRuntime:
    """One task = one Job named after it; its current run = the pod of the Job this runtime started or adopted."""

    #: ``ReadsEveryStack``: every task's agent serves its program's stacks.
    reads_every_stack = True

    def __init__(self, api: KubeApi, plan: Plan, namespace: str,
                 clock: Callable[[], float] = time.monotonic, pause: Callable[[float], None] = time.sleep,
                 stacks_port: int = endpoint_wire.PORT, in_cluster: bool = False,
                 objects: Callable[[KubeApi, str, str, Callable[[], float]], RunObjects] = RunObjects):
        """``objects`` makes the run's ``RunObjects`` (api, namespace, cluster name, clock)."""
        self.api = api
        self.stacks_port = stacks_port
        #: In the supervisor pod: the stack endpoints are asked at their pods' IPs; else through port-forwards.
        self.in_cluster = in_cluster
        self.plan = plan
        self.namespace = namespace
        self._clock = clock
        self._pause = pause
        self._uids: dict[str, str] = {}
        #: Each task's current run in its pod, as its agent numbers them (1: the pod's first).
        self._run: dict[str, int] = {}
        #: How each task's last run ended, where its agent said so (an in-place run ends with its pod running).
        self._ended: dict[str, agent_control.AgentState] = {}
        self._kept = KeptJobs()
        self._followers: dict[str, _Follower] = {}
        #: The runtime's own lines for a task with no follower yet (``_say``).
        self._notes: dict[str, list[str]] = {}
        #: Job uid -> why Kubernetes was ending its pod (``_disruption``), as a poll last saw it: the pod may be gone
        #: (the Job controller counted it) before its end is read.
        self._disrupted: dict[str, str] = {}
        #: The Job uids a poll saw a pod of: their pods' watch is not behind their Job's (``_pods_behind``).
        self._had_pods: set[str] = set()
        #: The ``minCount`` of the run's PodGroup, kept to the tasks meant to run (``gang.GangSize``).
        self._gang = gang.GangSize(api, plan, namespace)
        self._gang_seen: Snapshot | None = None
        #: The run's pods and Jobs, watched.
        self.objects = objects(api, namespace, plan.name, clock)

    # -- Runtime ---------------------------------------------------------------------------------------------

    def start(self, task: Task) -> None:
        self._gang.starting()
        if self._start_in_place(task):
            return
        with self.api.errors(f"start {task.name}"):
            job = self.api.read_if_exists(Kind.JOB, task.name, self.namespace)
            if job is not None and job.get("spec", {}).get("suspend") and not job.get("status", {}).get("startTime"):
                job = self.api.merge_patch(Kind.JOB, task.name, self.namespace, {"spec": {"suspend": False}})
            elif job is None:  # deleted: by its ttlSecondsAfterFinished once it ended, or by someone
                if (kept := self._kept.copy(task.name)) is None:
                    raise LaunchError(f"cannot start {task.name}: its Job is gone (deleted outside tfcluster)")
                job = self._create(kept)
            else:
                self.api.delete(Kind.JOB, task.name, self.namespace, propagation="Background")
                job = self._create(fresh_copy(job))
        self._attach(task, job)

    def adopt(self, task: Task) -> bool:
        """Attach to the task's started Job; first waits for the run's objects to be listed, so that a ``poll``
        right after reads the pod's end if it ended unsupervised (``watched.Unreachable`` if they cannot be)."""
        while self.objects.snapshot() is None:
            self._pause(LISTING_SECONDS)
        job = self.api.read_if_exists(Kind.JOB, task.name, self.namespace)
        if job is None or job.get("spec", {}).get("suspend"):
            return False
        self._attach(task, job)
        pod = self._current(task)
        if pod is not None and exit_of(pod) is None:  # a held agent's run may have ended, or be a later one
            state, _ = self._order(pod, agent_control.Status(token=self.plan.event_token))
            if state is not None and state.run:
                self._run[task.name] = state.run
                if state.exit_code is not None:
                    self._ended[task.name] = state
        return True

    def poll(self, task: Task) -> int | None:
        uid = self._uids.get(task.name)
        if uid is None:
            return None
        seen = self.objects.snapshot()
        if seen is None:
            raise self.objects.not_now()  # stale: nothing is decided from it; the supervisor backs off
        self._fit_gang(seen)
        ended = self._ended_run(task)
        pods = seen.pods.get(uid, [])
        if pods:
            self._had_pods.add(uid)
            if why := _disruption(pods[-1]):
                self._disrupted[uid] = why
            code = exit_of(pods[-1]) if ended is None else ended.exit_code
            return self._unless_disrupted(task, code, self._disrupted.get(uid, ""),
                                          f"pod {pods[-1]['metadata']['name']}")
        job = seen.jobs.get(task.name)
        if job is None or job["metadata"]["uid"] != uid:  # not seen yet, or gone: asked
            job = self.api.read_if_exists(Kind.JOB, task.name, self.namespace)
        if job is not None and job["metadata"]["uid"] != uid:
            job = None
        if job is None and ended is None:
            self._say(task, f"Job {task.name} is gone (deleted outside tfcluster)")
            return LOST_EXIT
        failed = None if job is None else k8s_status.job_failed(job)
        if failed is not None and ended is None and uid not in self._had_pods and self._pods_behind(uid):
            return None  # its pods' watch has not sent them yet: their end is read once it did
        disrupted = self._disrupted.get(uid) or ("DisruptionTarget" if _failed_by_disruption(failed) else "")
        if ended is not None:  # its run ended in place, its pod (maybe its Job) gone since
            return self._unless_disrupted(task, ended.exit_code, disrupted, f"the pod of {task.name}")
        if disrupted:
            self._say(task, f"the pod of {task.name} was disrupted by Kubernetes ({disrupted}) and is gone: taken "
                            "as a preemption")
            return int(ExitCode.PREEMPTED)
        if failed is not None:
            why = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
            self._say(task, f"Job {task.name} failed without a pod: {why}")
            return LOST_EXIT
        return None

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None:
        grace = max(1, math.ceil(grace_seconds))  # 0 would be a forced deletion: no SIGTERM, no save
        running = [(task, pod) for task in tasks if (pod := self._current(task)) is not None
                   and exit_of(pod) is None and self._ended_run(task) is None]
        stop = agent_control.Stop(token=self.plan.event_token, grace_seconds=grace_seconds)
        with ThreadPoolExecutor(max_workers=max(1, len(running))) as pool:  # every grace at once
            answers = list(pool.map(lambda pair: self._order(pair[1], stop)[0], running))
        stopping = {}
        for (task, pod), state in zip(running, answers, strict=True):
            if state is not None and state.exit_code is not None and state.run == self._run.get(task.name):
                self._ended[task.name] = state  # stopped in place: the pod stays for the next run
                continue
            name = pod["metadata"]["name"]
            with self.api.unless_gone(f"delete pod {name}"):
                self.api.delete(Kind.POD, name, self.namespace, grace_seconds=grace)
            stopping[task.name] = name
        ends = self._clock() + grace + STOP_SLACK_SECONDS
        while stopping and self._clock() < ends:
            self._pause(LISTING_SECONDS)
            seen = self.objects.snapshot()
            if seen is None:
                continue  # stale: no pod is taken as ended
            left = {task: name for task, name in stopping.items()
                    if (pod := seen.pod(name)) is not None and exit_of(pod) is None}
            if len(left) < len(stopping):  # the kubelets are ending them: the slack counts from this end
                ends = max(ends, self._clock() + STOP_SLACK_SECONDS)
            stopping = left
        if stopping:
            raise LaunchError(f"pods still running {STOP_SLACK_SECONDS:.0f} s after their grace and after the last "
                              f"of the others ended: {', '.join(sorted(stopping.values()))}")

    def output(self, task: Task) -> list[str]:
        pod = self._current(task)
        follower = self._followers.get(task.name)
        noted = self._notes.pop(task.name, [])
        if pod is None:  # not created yet, or deleted (``stop``): what its follower read, to the end of the log
            return noted + ([] if follower is None else follower.drain(DRAIN_SECONDS))
        return noted + self._follower(task, pod).drain(DRAIN_SECONDS if exit_of(pod) is not None else 0.0)

    def dump_stacks(self, task: Task) -> None:
        """Nothing: a ``ReadsEveryStack`` runtime is never asked (``launcher.supervision.runtime.signalled``)."""

    def read_stacks(self, task: Task) -> str | None:
        """The program's stacks, asked of its stack endpoint, or None with one line why."""
        pod = self._current(task)
        return None if pod is None else self._ask_stacks(task, pod)

    def placing(self, task: Task) -> bool:
        """``Placing``: the task's started Job has no pod yet, or the scheduler has not bound its pod (a gang waiting
        for room, a quota, pods of a higher priority first)."""
        if task.name not in self._uids:
            return False
        pod = self._current(task)
        return pod is None or not (k8s_status.PodView(pod).scheduled() or pod_io.started(pod))

    def oom_killed(self, task: Task) -> bool:
        """True if the kernel's OOM killer ended the task's container (the kubelet's ``OOMKilled``), or struck
        in it while the run its agent ended ran."""
        if (ended := self._ended_run(task)) is not None:
            return ended.oom_killed
        pod = self._current(task)
        terminated = None if pod is None else k8s_status.PodView(pod).terminated()
        return terminated is not None and terminated.get("reason") == "OOMKilled"

    def close(self) -> None:
        """Each held agent told to quit (its pod then ends as its last run did), the logs' followers stopped."""
        quit_ = agent_control.Quit(token=self.plan.event_token)
        for task in list(self._ended):
            pod = self._current_by_name(task)
            if pod is not None and exit_of(pod) is None:
                self._order(pod, quit_)
        self.objects.close()
        for follower in self._followers.values():
            follower.stop()
        self._followers.clear()

    # -- helpers ---------------------------------------------------------------------------------------------

    def _follower(self, task: Task, pod: Obj) -> _Follower:
        """The follower of ``pod``'s log, started for it if the task's is another pod's or none."""
        name = pod["metadata"]["name"]
        follower = self._followers.get(task.name)
        if follower is None or follower.pod != name:
            if follower is not None:
                follower.stop()
            follower = self._followers[task.name] = _Follower(
                self.api, name, self.namespace, partial(self._read_pod, name), self.plan.event_token)
        return follower

    def _start_in_place(self, task: Task) -> bool:
        """The task's next run started by the agent of its pod, which is still there and running: True; False
        where it is not (no pod, it ended or is being deleted, its agent does not answer: the Job is replaced)."""
        if task.name not in self._ended:
            return False
        seen = self.objects.snapshot()
        pod = None if seen is None else self._current(task, seen)
        if pod is None or exit_of(pod) is not None or pod["metadata"].get("deletionTimestamp"):
            return False
        state, _ = self._order(pod, agent_control.Start(token=self.plan.event_token))
        if state is None or not state.started:
            return False
        self._run[task.name] = state.run
        del self._ended[task.name]
        self._follower(task, pod)  # the same log goes on: the next run's lines follow the last one's
        return True

    def _ended_run(self, task: Task) -> agent_control.AgentState | None:
        """How the task's current run ended in its pod, if its agent said so (in the log; asked of it where the
        log's stream broke while the pod runs); None while it runs, or where the pod itself ended."""
        if (ended := self._ended.get(task.name)) is not None:
            return ended
        pod = self._current(task)
        if pod is None or exit_of(pod) is not None or not pod_io.started(pod):
            return None
        run = self._run.get(task.name, 1)
        follower = self._follower(task, pod)
        state = follower.log.ended.get(run)
        if state is None and not follower.following:
            state, _ = self._order(pod, agent_control.Status(token=self.plan.event_token))
            state = state if state is not None and state.run == run and state.exit_code is not None else None
        if state is not None:
            self._ended[task.name] = state
        return state

    def _unless_disrupted(self, task: Task, code: int | None, disrupted: str, pod: str) -> int | None:
        """``code``, or PREEMPTED (with one line why) for a run that failed under a pod Kubernetes disrupted (its
        ``DisruptionTarget``: the kubelet's SIGTERM ended the run, in place or with its pod, or SIGKILL did once the
        grace passed): the one rule whether the pod, or only its Job's ``manifests.DISRUPTED`` failure, is seen."""
        if code in (None, 0, ExitCode.PREEMPTED) or not disrupted:
            return code
        self._say(task, f"{pod} was disrupted by Kubernetes ({disrupted}) and its run ended with {code}: taken as a "
                        "preemption")
        return int(ExitCode.PREEMPTED)

    def _order(self, pod: Obj, control: stack_endpoint.Control) -> tuple[agent_control.AgentState | None, str]:
        """``control`` given to ``pod``'s agent (at its IP in the cluster, else through a port-forward)."""
        ip = pod.get("status", {}).get("podIP")
        if not ip:
            return None, "no IP yet"
        if self.in_cluster:
            return stack_endpoint.order(ip, self.stacks_port, control)
        return pod_io.forwarded_order(self.api, pod["metadata"]["name"], self.namespace, self.stacks_port, control)

    def _ask_stacks(self, task: Task, pod: Obj) -> str | None:
        """What the stack endpoint of ``pod``'s program answers (the run's token), or None (one line why)."""
        ip = pod.get("status", {}).get("podIP")
        if exit_of(pod) is not None or not ip:
            return None
        if self.in_cluster:
            dump, why = stack_endpoint.ask(ip, self.stacks_port, self.plan.event_token)
        else:
            dump, why = pod_io.forwarded_stacks(self.api, pod["metadata"]["name"], self.namespace, self.stacks_port,
                                                self.plan.event_token)
        if dump is None:
            say_none(task.name, why)
        return dump

    def _create(self, job: Obj) -> Obj:
        """``job`` created; waits (bounded) for the name of the one it replaces to be free."""
        ends = self._clock() + REPLACE_SECONDS
        while True:
            created = self.api.create_unless_exists(Kind.JOB, self.namespace, job)
            if created is not None:
                return created
            if self._clock() >= ends:
                raise LaunchError(f"cannot start {job['metadata']['name']}: the Job it replaces is still there "
                                  f"{REPLACE_SECONDS:.0f} s after it was deleted")
            self._pause(LISTING_SECONDS)

    def _attach(self, task: Task, job: Obj) -> None:
        self._uids[task.name] = job["metadata"]["uid"]
        self._run[task.name] = 1
        self._ended.pop(task.name, None)
        self._kept.keep(task.name, job)
        follower = self._followers.pop(task.name, None)
        if follower is not None:
            follower.stop()

    def _fit_gang(self, seen: Snapshot) -> None:
        """``gang.GangSize.running`` with the tasks whose current run (started or adopted here) has not ended (no pod
        yet, or one not ended), once per snapshot of the run's objects (a new one after each change)."""
        if seen is self._gang_seen:
            return
        self._gang_seen = seen
        runs = [seen.pods.get(uid, []) for uid in self._uids.values()]
        self._gang.running(sum(1 for pods in runs if not pods or exit_of(pods[-1]) is None))

    def _pods_behind(self, uid: str) -> bool:
        """Whether Job ``uid``, seen failed with no pod and none seen before, still has pods on the API server: the
        two kinds are watched apart, so its Job's end may be seen before its pods (asked, only then)."""
        pods, _ = self.api.listing(Kind.POD, self.namespace, f"{CONTROLLER_UID}={uid}")
        return bool(pods)

    def _current(self, task: Task, seen: Snapshot | None = None) -> Obj | None:
        """The task's current pod as last seen (stale or not), or in ``seen``."""
        return self._current_by_name(task.name, seen)

    def _current_by_name(self, name: str, seen: Snapshot | None = None) -> Obj | None:
        uid = self._uids.get(name)
        pods = (seen or self.objects.last()).pods.get(uid, []) if uid is not None else []
        return pods[-1] if pods else None

    def _read_pod(self, name: str) -> Obj | None:
        """``name`` as last seen (a follower waits for its container to start), None once it is gone."""
        return self.objects.pod(name)

    def _say(self, task: Task, line: str) -> None:
        """A line in the task's output (the supervisor's record of why its run ended)."""
        follower = self._followers.get(task.name)
        if follower is not None:
            follower.log.lines.note(line)
        else:  # no log followed yet (a run adopted after its pod was gone): the next ``output`` gives it
            self._notes.setdefault(task.name, []).append(line)

