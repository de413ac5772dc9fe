"""The Kubernetes supervisor runtime: one round of the watch (``Backend.watch_round``) and the stacks of a run's pods.

Contract: the Job controller already retries, fails and times out tasks; ``Supervision.round`` adds what it
cannot express and returns one line per thing it did: MultiWorkerMirrored gang restarts of survivors that
hang, deleting the Jobs left running once the run ended, the failure rules the Job controller cannot enforce
(``launcher.backends.kubernetes.failures``: a ``fail`` rule on a log pattern or roles ends the run's Jobs),
and the stall watchdog (``launcher.backends.kubernetes.stall``) with stacks read through ``pods/exec``; each round
first feeds the run's goodput ledger (``launcher.backends.kubernetes.goodput_ledger``).
What it keeps between rounds lives in the run's ConfigMap (and which pods' stacks showed no stall, in memory);
``read_status`` reads it back with the Jobs, the pods and the progress the tasks log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial

from launcher.backends.kubernetes import apply, goodput_ledger
from launcher.backends.kubernetes import failures as k8s_failures
from launcher.backends.kubernetes import stall as k8s_stall
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.backends.kubernetes.pods import JOB_KEY
from launcher.backends.pyspy import PYSPY_ENV, PYSPY_SECONDS, Ran, read_container_stacks, say_none
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.protocol.events import Event, EventReader
from launcher.protocol.progress import JobProgress, fold, seed
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import LOG_TAIL_LINES, RoleType, RuleAction
from launcher.supervision import harness
from launcher.supervision.rules import Action
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.stack_evidence import read, two_samples
from launcher.supervision.stall import SIGNS_OF_LIFE, WATCHED_EVENTS, StallVerdict, conclude, describe, judge
from launcher.supervision.status import JobStatus, StallStatus, State, SupervisorState
from launcher.supervision.stragglers import stragglers

log = logging.getLogger(__name__)

#: A MultiWorkerMirrored survivor still running this long after a peer failed is restarted (survivors normally fail in seconds).
GANG_GRACE_SECONDS = 60.0
#: Log lines read from the lead task (and the evaluator) to show progress.
PROGRESS_TAIL_LINES = 50
#: Log lines of the lead's pod the stall watchdog reads each round (the more, the more of its history it sees).
STALL_TAIL_LINES = 1000
#: How much longer than py-spy's own bound an exec in a pod may take (the API server, the kubelet, the websocket).
EXEC_SLACK_SECONDS = 20


def log_lines(api: KubeApi, pod: str, namespace: str, follow: bool, tail: int | None = None) -> Iterator[str]:
    """The task container's log lines of ``pod``."""
    return api.log_lines(pod, namespace, CONTAINER, follow=follow, tail=tail)


def recent_events(api: KubeApi, runs: list[k8s_status.PodView], namespace: str, reader: EventReader,
                  tail: int = PROGRESS_TAIL_LINES) -> list[Event] | None:
    """The events (of ``reader``'s run) among the last ``tail`` log lines of the latest of ``runs`` (none while
    it is pending or unreadable); None when those lines are all other output (the events are further back).
    The pod's log lines are the task's own: read without timestamps, nothing to strip."""
    if not runs or runs[-1].phase == "Pending":
        return []
    try:
        lines = list(log_lines(api, runs[-1].name, namespace, follow=False, tail=tail))
    except LaunchError:
        return []  # e.g. the container is not started yet or was replaced: status without its events
    events = [event for event in map(reader.parse, lines) if event is not None]
    return None if not events and len(lines) >= tail else events


def exec_in_task(api: KubeApi, pod: str, namespace: str, command: list[str]) -> Ran | str:
    """``command`` run in the pod's task container (``pods/exec``), with py-spy's environment."""
    return api.exec(pod, namespace, CONTAINER, ["env", *(f"{k}={v}" for k, v in PYSPY_ENV.items()), *command],
                    timeout=PYSPY_SECONDS + EXEC_SLACK_SECONDS)


def read_stacks(api: KubeApi, name: str, runs: dict[tuple[RoleType, int], list[k8s_status.PodView]],
                namespace: str) -> dict[str, str | None]:
    """``{task: dump, None if it gave none}`` of each task whose latest pod runs (one line on stderr why not);
    py-spy reads any Python program, so no task is asked to dump its own (no signal reaches a pod)."""
    dumps: dict[str, str | None] = {}
    for (role, index), views in sorted(runs.items(), key=lambda item: (item[0][0].value, item[0][1])):
        if views[-1].phase != "Running" or views[-1].deleting:
            continue
        task = naming.task_name(name, role, index)
        dump, why = read_container_stacks(partial(exec_in_task, api, views[-1].name, namespace))
        if dump is None:
            say_none(task, why)
        dumps[task] = dump
    return dumps


def end_job(api: KubeApi, job: Obj, now: float, namespace: str) -> None:
    """Fail ``job`` now as the Job controller does at a deadline: ``activeDeadlineSeconds`` set to its age.

    A merge patch of just that field (no resourceVersion): never in conflict with the Job controller's
    status writes. A Job gone meanwhile needs no ending.
    """
    name = job["metadata"]["name"]
    started = k8s_status.parse_time(job.get("status", {}).get("startTime")) or now
    with api.unless_gone(f"patch Job {name}"):
        api.merge_patch_job(name, namespace, {"spec": {"activeDeadlineSeconds": max(1, int(now - started))}})


def supervisor_state(api: KubeApi, name: str, namespace: str) -> tuple[SupervisorState | None, str]:
    """What ``status`` says of the run's in-cluster supervisor (``kubernetes.supervisor``), and why it is not
    alive (``k8s_status.supervisor_state``); while it is not alive, ``watch`` supervises."""
    jobs = apply.of_supervisor(api, Kind.JOB, namespace, name)
    pods = apply.of_supervisor(api, Kind.POD, namespace, name) if jobs else []
    return k8s_status.supervisor_state(jobs, pods)


def keep_stacks_here(name: str, number: int, dumps: dict[str, str | None]) -> str | None:
    """The dumps under this machine's state directory of the run (``down`` removes it); None if unwritable."""
    try:
        return write_stacks(harness.StateDir.of(BackendKind.K8S, name).stacks, number, dumps)
    except OSError as exc:
        log.warning("tfcluster: cannot write the stacks of %s: %s", name, exc)
        return None


#: Keeps a stall's stacks (run, stall number, ``{task: dump}``) and says where: a path, or where to read them.
KeepStacks = Callable[[str, int, dict[str, str | None]], str | None]


class Supervision:
    """The watch's rounds over one backend's API (``round``); remembers which lead pods' stacks showed no stall."""

    def __init__(self, api: KubeApi, *, clock: Callable[[], float], gang_grace: float, linger: float | None,
                 pause: Callable[[float], None], stack_gap: float, keep_stacks: KeepStacks = keep_stacks_here):
        self.api = api
        self.keep_stacks = keep_stacks
        self._clock = clock
        self._gang_grace = gang_grace
        self._linger = linger
        self._pause = pause  # between a suspected stall's two stack samples
        self._stack_gap = stack_gap
        self._stall_looks: dict[str, float] = {}  # lead pod -> when its stacks were last read and showed no stall
        self.listed: tuple[list[Obj], list[Obj]] | None = None  # the Jobs and pods of the last round, if it acted on none

    def round(self, name: str, namespace: str) -> list[str]:
        """One supervision step; returns what it did (one line per deleted pod or Job, and per stall)."""
        jobs = apply.of_cluster(self.api, Kind.JOB, namespace, name)
        pods = apply.of_cluster(self.api, Kind.POD, namespace, name)
        self.listed = (jobs, pods)
        status = k8s_status.job_status(name, jobs, pods)
        if status is None:
            return []
        now = self._clock()
        reader = EventReader(k8s_status.event_token(jobs))
        goodput_ledger.account(self.api, name, namespace, jobs, k8s_status.runs_by_task(pods), status.state.terminal,
                               now, lambda pod: recent_events(self.api, [pod], namespace, reader, STALL_TAIL_LINES))
        actions = []
        for pod in k8s_status.stale_gang_pods(jobs, pods, now, self._gang_grace):
            apply.delete(self.api, Kind.POD, pod, namespace)
            actions.append(f"gang restart: deleted {pod} (it outlived a failed peer; its Job recreates it)")
        for job in k8s_status.leftover_jobs(jobs, status, now, self._linger):
            apply.delete(self.api, Kind.JOB, job, namespace)
            actions.append(f"run {status.state.value}: deleted Job {job}")
        if status.state in (State.PENDING, State.RUNNING, State.RESTARTING) and not actions:
            actions.extend(self._watch_failures(name, namespace, jobs, pods, now))
        if status.state is State.RUNNING and not actions:
            actions.extend(self._watch_stall(name, namespace, jobs, pods, status.restarts, now))
        if actions:
            self.listed = None  # what it changed is listed again
        return actions

    def _watch_failures(self, name: str, namespace: str, jobs: list[Obj], pods: list[Obj], now: float) -> list[str]:
        """Judge each failed pod once by the failure rules (``launcher.backends.kubernetes.failures``): a ``fail``
        rule the engine could not enforce ends the training Jobs through their deadline, its message kept in the
        run's ConfigMap for ``status``; a ``restart``/``continue`` rule it could not enforce is said, once."""
        policy = k8s_status.job_policy(jobs[0])
        if not policy.failure_rules:
            return []
        config_map = apply.config_map(self.api, name, namespace)
        record = (apply.record(config_map, k8s_failures.FAILURES_KEY, k8s_failures.FailureRecord)
                  or k8s_failures.FailureRecord())
        todo = k8s_failures.pending(policy, name, pods, record.judged)
        if not todo:
            return []
        reader = EventReader(k8s_status.event_token(jobs))
        actions = []
        for failed in todo:
            record.judged.append(failed.pod)
            try:
                lines = list(log_lines(self.api, failed.pod, namespace, follow=False, tail=LOG_TAIL_LINES))
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
                        end_job(self.api, job, now, namespace)
                        actions.append(f"failure rules: ended Job {job['metadata']['name']} (its deadline is now)")
                break
            actions.append(f"failure rules: {what}: {found.match.describe()} is not enforced on Kubernetes "
                           "(the Job controller replaces the pod under its budget)")
        apply.write_data(self.api, config_map, k8s_failures.FAILURES_KEY, record.model_dump_json(), namespace)
        return actions

    def _watch_stall(self, name: str, namespace: str, jobs: list[Obj], pods: list[Obj], restarts_used: int,
                     now: float) -> list[str]:
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
        pod, config_map = lead[-1], apply.config_map(self.api, name, namespace)
        record = apply.record(config_map, k8s_stall.STALL_KEY, k8s_stall.StallRecord)
        run_config = apply.record(config_map, JOB_KEY, RunConfig)
        if record is not None and record.pod == pod.name:
            return []  # this pod's stall was acted on
        reader = EventReader(k8s_status.event_token(jobs))
        reporting = run_config is not None and run_config.lead_runs_entrypoint and reader.reads  # steps it can read
        assert pod.started is not None
        events = recent_events(self.api, [pod], namespace, reader, STALL_TAIL_LINES)
        if events is None:
            return []  # its last report is beyond the lines read: the watchdog cannot tell when it was
        clock = k8s_stall.clock(pod.started, events, reporting, self._stall_looks.get(pod.name))
        judgement = judge(clock, now, policy.stall_floor_seconds)
        if judgement.verdict is not StallVerdict.SUSPECTED:
            return []
        last: dict[str, str | None] = {}

        def sample() -> dict[str, str | None]:
            dumps = read_stacks(self.api, name, runs, namespace)
            last.update({task: dump for task, dump in dumps.items() if dump is not None or task not in last})
            return dumps

        def wait(seconds: float) -> bool:
            self._pause(seconds)
            return True  # whether the lead advanced meanwhile is read once both samples are in

        trains = {naming.task_name(name, role, index): role.trains for role, index in runs}
        samples = two_samples(sample, wait, {}, trains, self._stack_gap)
        again = recent_events(self.api, [pod], namespace, reader, STALL_TAIL_LINES)
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
        directory = self.keep_stacks(name, number, last)
        config_map = apply.config_map(self.api, name, namespace)  # keep_stacks may have updated it
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
                    apply.delete(self.api, Kind.POD, view.name, namespace)
                    actions.append(f"stall restart: deleted {view.name} (its Job recreates it)")
        elif decision.action is Action.FAIL:
            for job in jobs:
                if k8s_status.job_role(job).trains and not (k8s_status.job_failed(job) or k8s_status.job_complete(job)):
                    end_job(self.api, job, now, namespace)
                    actions.append(f"stall: ended Job {job['metadata']['name']} (its deadline is now)")
        return actions

    def _write_stall(self, config_map: Obj, record: k8s_stall.StallRecord, namespace: str) -> None:
        apply.write_data(self.api, config_map, k8s_stall.STALL_KEY, record.model_dump_json(), namespace)


def read_status(api: KubeApi, name: str, namespace: str, now: float) -> JobStatus | None:
    """The run's status (``Backend.describe``) at ``now``: its Jobs and pods, the progress its lead and evaluator
    logged, and what the watch recorded in its ConfigMap (the stall, the failure rules' verdict, the goodput
    ledger); None without its Jobs."""
    jobs, pods = apply.of_cluster(api, Kind.JOB, namespace, name), apply.of_cluster(api, Kind.POD, namespace, name)
    status = k8s_status.job_status(name, jobs, pods)
    if status is None:
        return status
    try:
        config_map: Obj | None = apply.config_map(api, name, namespace)
    except LaunchError:
        config_map = None  # being deleted: status without what the ConfigMap holds
    run_config = apply.record(config_map, JOB_KEY, RunConfig)
    policy = k8s_status.job_policy(jobs[0])
    runs = k8s_status.runs_by_task(pods)
    reader = EventReader(k8s_status.event_token(jobs))
    events = {(role, index): recent_events(api, views, namespace, reader) or []
              for (role, index), views in runs.items() if role.trains or role is RoleType.EVALUATOR}
    lead = events.get((policy.lead.role, policy.lead.index), [])
    start = seed(run_config) if run_config is not None else JobProgress()
    status.progress = fold(fold(start, lead, from_lead=True), events.get((RoleType.EVALUATOR, 0), []),
                           from_lead=False)
    status.tensorboard_dir = k8s_status.tensorboard_dir(jobs)
    status.supervisor, status.supervisor_note = supervisor_state(api, name, namespace)
    record = apply.record(config_map, k8s_stall.STALL_KEY, k8s_stall.StallRecord)
    watching = (run_config is not None and run_config.lead_runs_entrypoint and reader.reads) or any(
        e.event in WATCHED_EVENTS or e.event in SIGNS_OF_LIFE for e in lead)
    status.stall = record.status if record is not None else StallStatus(watching=watching)
    if status.state is State.FAILED and record is not None and record.status.message.startswith("failed:"):
        status.message = "; ".join(filter(None, [record.status.message, status.message]))
    failures = apply.record(config_map, k8s_failures.FAILURES_KEY, k8s_failures.FailureRecord)
    if status.state is State.FAILED and failures is not None and failures.message:
        status.message = "; ".join(filter(None, [failures.message, status.message]))
    times = {naming.task_name(name, role, index): k8s_stall.step_times(found)
             for (role, index), found in events.items() if role.trains}
    status.stragglers = stragglers(times)
    status.goodput = goodput_ledger.status_goodput(config_map, runs, status.state.terminal, now)
    for task in status.tasks:
        task.step_time = times[task.name][-1] if times.get(task.name) else None
    return status
