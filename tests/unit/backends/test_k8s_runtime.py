"""``KubernetesRuntime`` (one Job per task) through the real client over HTTP, against the fake API server with its
Job controller running at once (``job_controller``): start, poll, stop, output, adopt, stacks; and the one
``Supervisor`` driving it (gang restart, the restart budget, a failure rule).

Time is the fake's clock: the runtime's ``clock`` reads it and its ``pause`` moves it, so a deleted pod's
process exits as its ``on_sigterm`` says while ``stop`` waits; the supervisor's pause moves it too and plays the
test's script (``World``). Only the log followers are threads: the tests wait for the lines they expect.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from fakes.kubernetes_api import IGNORES_SIGTERM, JOB_NAME_KEY, FakeKubernetes, OnSigterm, permission
from helpers.k8s_fake import SettledObjects, backend_for, pod_of, settled, write
from helpers.k8s_specs import dry_run_for
from helpers.polling import wait_for_condition
from launcher.backends import agent_log
from launcher.backends.kubernetes import apply, supervisor_objects
from launcher.backends.kubernetes.cluster_state import ConfigMapStore
from launcher.backends.kubernetes.runtime import (
    CONTROLLER_UID,
    STOP_SLACK_SECONDS,
    KeptJobs,
    KubernetesRuntime,
    fresh_copy,
)
from launcher.backends.kubernetes.watched import Snapshot
from launcher.errors import LaunchError
from launcher.plan.planner import Plan, Task
from launcher.protocol import agent_control
from launcher.protocol.agent_control import AgentState
from launcher.protocol.events import StacksOnSignal, Step
from launcher.protocol.exitcodes import LOST_EXIT
from launcher.protocol.stack_endpoint import Control
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.supervision.runtime import Placing, ReadsEveryStack, signalled
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning
from launcher.worker.stack_server import serve_stacks

SPEC: dict[str, Any] = {"name": "rt", "roles": {"chief": {}, "worker": {"replicas": 1}},
                        "restart": {"policy": "exit-code", "max_restarts": 2}, "kubernetes": {"supervisor": False}}
CHIEF, WORKER = "rt-chief-0", "rt-worker-0"


def launched(fake: FakeKubernetes, spec: dict[str, Any] = SPEC,
             pause: Callable[[float], None] | None = None) -> tuple[Plan, KubernetesRuntime]:
    """The run's objects applied (its task Jobs suspended) and a runtime over them on the fake's clock."""
    fake.job_controller = True
    dry_run = dry_run_for(spec)
    api = backend_for(fake).api
    apply.submit(api, dry_run, "default")
    return dry_run.plan, runtime_for(fake, dry_run.plan, pause)


def runtime_for(fake: FakeKubernetes, plan: Plan, pause: Callable[[float], None] | None = None) -> KubernetesRuntime:
    """A runtime on the fake's clock; ``pause`` moves it (by default only that)."""
    def moves(seconds: float) -> None:
        fake.now += seconds

    return KubernetesRuntime(backend_for(fake).api, plan, "default", clock=lambda: fake.now, pause=pause or moves,
                             objects=settled(fake))


def task(plan: Plan, name: str) -> Task:
    return next(t for t in plan.tasks if t.name == name)


def pods(fake: FakeKubernetes, name: str) -> list[dict[str, Any]]:
    """The pods of task ``name``'s Job(s), oldest first."""
    return sorted(fake.list("pods", "default", {JOB_NAME_KEY: name}),
                  key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))


def later(fake: FakeKubernetes) -> None:
    """A second passes: the runtime lists the pods again (it reuses a listing within ``LISTING_SECONDS``)."""
    fake.now += 1


def read_all(runtime: KubernetesRuntime, t: Task, until: Callable[[list[str]], bool]) -> list[str]:
    """The task's output, read until ``until`` holds of all read so far (the followers are threads)."""
    lines: list[str] = []

    def more() -> bool:
        lines.extend(runtime.output(t))
        return until(lines)

    wait_for_condition(more)
    return lines


# --- start, poll, adopt -------------------------------------------------------------------------------------------


def test_start_lets_a_suspended_job_run_and_a_job_that_ran_is_replaced_by_a_fresh_copy(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief = task(plan, CHIEF)
    assert runtime.poll(chief) is None and pods(fake, CHIEF) == []  # rendered suspended: nothing runs yet
    first = fake.get("jobs", CHIEF)
    runtime.start(chief)
    [pod] = pods(fake, CHIEF)
    assert fake.get("jobs", CHIEF)["metadata"]["uid"] == first["metadata"]["uid"]  # the same Job, let run
    assert pods(fake, WORKER) == []  # only the task started
    assert runtime.poll(chief) is None
    fake.finish_pod(pod["metadata"]["name"], 3)
    later(fake)
    assert runtime.poll(chief) == 3
    runtime.start(chief)  # again: the Job ran, so a fresh copy of it replaces it
    second = fake.get("jobs", CHIEF)
    assert second["metadata"]["uid"] != first["metadata"]["uid"] and second["spec"]["suspend"] is False
    assert second["spec"]["template"]["spec"] == first["spec"]["template"]["spec"]
    [new] = pods(fake, CHIEF)  # the old pod went with its Job
    assert new["metadata"]["labels"][CONTROLLER_UID] == second["metadata"]["uid"]
    assert runtime.poll(chief) is None


def test_a_fresh_copy_is_the_job_as_applied_running() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "t", "uid": "u", "resourceVersion": "9", "creationTimestamp": "x", "labels": {"a": "b"}},
           "spec": {"suspend": True, "backoffLimit": 0, "selector": {"matchLabels": {CONTROLLER_UID: "u"}},
                    "template": {"metadata": {"labels": {"a": "b", CONTROLLER_UID: "u", "controller-uid": "u",
                                                         JOB_NAME_KEY: "t", "job-name": "t"}}, "spec": {"x": 1}}},
           "status": {"startTime": "y"}}
    assert fresh_copy(job) == {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t", "labels": {"a": "b"}},
                               "spec": {"suspend": False, "backoffLimit": 0,
                                        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}}}}


def test_start_waits_for_the_name_of_the_replaced_job_to_be_free(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief = task(plan, CHIEF)
    runtime.start(chief)
    fake.finish_pod(pod_of(fake, CHIEF), 1)
    fake.fail_next("POST", "jobs", 409)  # the old Job not gone yet
    runtime.start(chief)
    assert fake.get("jobs", CHIEF)["spec"]["suspend"] is False and runtime.poll(chief) is None


def test_start_gives_up_on_a_replaced_job_whose_name_stays_taken(fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, runtime = launched(fake)
    chief = task(plan, CHIEF)
    runtime.start(chief)
    fake.finish_pod(pod_of(fake, CHIEF), 1)
    monkeypatch.setattr(fake, "delete", lambda *args, **kwargs: fake.get("jobs", CHIEF))  # a finalizer holds it
    with pytest.raises(LaunchError, match=f"cannot start {CHIEF}: the Job it replaces is still there"):
        runtime.start(chief)


def test_start_of_a_job_deleted_outside_tfcluster_is_a_launch_error(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    fake.delete("jobs", "default", CHIEF, "Background")
    with pytest.raises(LaunchError, match=f"cannot start {CHIEF}: its Job is gone"):
        runtime.start(task(plan, CHIEF))


def test_a_job_its_ttl_removed_after_it_ended_is_created_again_as_it_was_applied(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief = task(plan, CHIEF)
    runtime.start(chief)
    applied = fake.get("jobs", CHIEF)
    fake.finish_pod(pod_of(fake, CHIEF), 0)
    later(fake)
    assert runtime.poll(chief) == 0
    fake.delete("jobs", "default", CHIEF, "Background")  # ttlSecondsAfterFinished: Kubernetes removed it
    runtime.start(chief)  # e.g. a server the policy starts again
    again = fake.get("jobs", CHIEF)
    assert again["metadata"]["uid"] != applied["metadata"]["uid"] and again["spec"]["suspend"] is False
    assert again["spec"]["template"]["spec"] == applied["spec"]["template"]["spec"]
    assert runtime.poll(chief) is None


def test_each_kept_job_costs_about_its_compact_json_and_each_copy_is_a_new_one(fake: FakeKubernetes) -> None:
    """The copies kept to create Jobs again are what 1,000 tasks hold longest (issue 48's memory): each costs about
    its compact JSON (4 kB), not the parsed Job's objects (about 21 KiB, five times that)."""
    plan, runtime = launched(fake)
    runtime.start(task(plan, CHIEF))
    job = fake.get("jobs", CHIEF)
    answer = json.dumps(job)  # each Job the runtime keeps is parsed from an answer of its own
    compact = len(json.dumps(fresh_copy(job), separators=(",", ":")))
    kept = KeptJobs()
    tracemalloc.start(32)  # frames enough to reach this test from what ``keep`` allocates
    try:
        for n in range(100):
            kept.keep(f"task-{n}", json.loads(answer))
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # what is still held of what this loop allocated: not what the runtime's watch threads (or, in a pytest-xdist
    # worker, its channel's thread) allocate meanwhile, which CI once counted in (407 kB against 375)
    mine = snapshot.filter_traces([tracemalloc.Filter(True, __file__, all_frames=True)])
    held = sum(stat.size for stat in mine.statistics("filename"))
    assert held < 100 * compact * 1.3, (held, compact)
    first = kept.copy("task-7")
    assert first == fresh_copy(job)
    assert first is not None
    first["spec"]["template"]["spec"].clear()
    assert kept.copy("task-7") == fresh_copy(job)  # a change to one copy is not kept
    assert kept.copy("gone") is None


@pytest.mark.parametrize(("code", "reason", "oom"), [(0, "Completed", False), (1, "Error", False), (137, "OOMKilled", True)])
def test_poll_reads_the_exit_code_and_the_oom_killer(fake: FakeKubernetes, code: int, reason: str, oom: bool) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    assert runtime.poll(worker) is None and runtime.oom_killed(worker) is False
    fake.finish_pod(pod_of(fake, WORKER), code, reason=reason)
    later(fake)
    assert runtime.poll(worker) == code
    assert runtime.oom_killed(worker) is oom


def test_a_job_deleted_outside_tfcluster_is_a_lost_run_and_says_so(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    fake.pod_logs["default", pod_of(fake, WORKER)] = "working\n"
    read_all(runtime, worker, lambda lines: "working" in lines)
    fake.delete("jobs", "default", WORKER, "Background")  # its pod is stopped and goes
    later(fake)
    assert pods(fake, WORKER) == []
    assert runtime.poll(worker) == LOST_EXIT
    assert read_all(runtime, worker, lambda lines: any("is gone" in line for line in lines))[-1] == \
        f"Job {WORKER} is gone (deleted outside tfcluster)"


def test_an_evicted_pod_without_an_exit_code_is_a_lost_run(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    fake.update("pods", "default", pod_of(fake, WORKER), lambda pod: pod["status"].update(
        phase="Failed", reason="Evicted", message="The node was low on resource: memory.", containerStatuses=[]))
    later(fake)
    assert runtime.poll(worker) == LOST_EXIT


def test_a_job_that_failed_without_a_pod_is_a_lost_run(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    assert runtime.output(worker) == []  # the supervisor reads each task's output each round
    fake.finish_pod(pod_of(fake, WORKER), 1)
    fake.delete("pods", "default", pod_of(fake, WORKER), "Background")  # counted, then gone: the Job failed
    later(fake)
    assert pods(fake, WORKER) == []
    assert runtime.poll(worker) == LOST_EXIT
    assert any("failed without a pod: BackoffLimitExceeded" in line for line in runtime.output(worker))


class PodsBehind(SettledObjects):
    """``SettledObjects`` whose pods' watch has sent nothing yet while ``behind``: the Jobs' watch is ahead of it."""

    behind = True

    def _seen(self) -> tuple[Snapshot, bool]:
        seen, current = super()._seen()
        return (Snapshot.of({}, seen.jobs) if self.behind else seen), current


def test_a_failed_job_whose_pods_are_not_seen_yet_waits_for_them_and_its_exit_and_log_are_read(
        fake: FakeKubernetes) -> None:
    """The two kinds are watched apart: the Job's end can arrive before its pod. That is no lost run: the poll
    asks for the Job's pods, waits while there are some, and then reads the pod's exit and its whole log."""
    fake.job_controller = True
    dry_run = dry_run_for(SPEC)
    api = backend_for(fake).api
    apply.submit(api, dry_run, "default")
    objects: list[PodsBehind] = []

    def made(api: Any, namespace: str, cluster: str, clock: Callable[[], float]) -> PodsBehind:
        objects.append(PodsBehind(fake, api, namespace, cluster, clock))
        return objects[-1]

    runtime = KubernetesRuntime(api, dry_run.plan, "default", clock=lambda: fake.now, objects=made)
    worker = task(dry_run.plan, WORKER)
    runtime.start(worker)
    fake.pod_logs["default", pod_of(fake, WORKER)] = "the worker's last words\n"
    fake.finish_pod(pod_of(fake, WORKER), 1)
    later(fake)
    assert runtime.poll(worker) is None and runtime.output(worker) == []
    objects[0].behind = False
    assert runtime.poll(worker) == 1
    assert read_all(runtime, worker, lambda lines: bool(lines)) == ["the worker's last words"]


@pytest.mark.parametrize("reason", ["PreemptionByScheduler", "EvictionByEvictionAPI", "DeletionByTaintManager"])
def test_a_pod_kubernetes_disrupted_is_a_preemption_also_once_it_is_gone(fake: FakeKubernetes, reason: str) -> None:
    """Preempted by the scheduler for a higher priority, evicted by a drain, deleted by the taint manager: the pod
    saves on SIGTERM and goes once the Job controller counted it, maybe before a poll read its end; its Job then
    failed without a pod, which is a preemption since the poll saw the disruption (not a lost run, 137)."""
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    assert runtime.output(worker) == []  # the supervisor reads each task's output each round
    fake.on_sigterm[WORKER] = OnSigterm(seconds=3)
    fake.preempt(pod_of(fake, WORKER), reason)
    later(fake)
    assert runtime.poll(worker) is None  # saving
    fake.now += 5
    assert pods(fake, WORKER) == []  # ended 143, counted, gone
    assert runtime.poll(worker) == 143
    assert any(f"disrupted by Kubernetes ({reason}) and is gone: taken as a preemption" in line
               for line in runtime.output(worker))


def test_a_scheduler_preemption_restarts_the_group_without_a_restart_and_the_run_succeeds(fake: FakeKubernetes) -> None:
    """``max_restarts: 0``: a worker preempted for a higher-priority pod (it saved) is a preemption, not a failure:
    the group restarts within ``max_preemptions`` and the run succeeds with 0 restarts."""
    fake.on_sigterm[WORKER] = OnSigterm(seconds=3)
    world = World(fake, {3: lambda fake: fake.preempt(pod_of(fake, WORKER))})
    world.script[14] = ends(CHIEF, 0)
    status = supervise(fake, world, {**SPEC, "restart": {"policy": "exit-code", "max_restarts": 0}})
    assert status.state is State.SUCCEEDED, status
    assert (status.preemptions, status.restarts) == (1, 0), status


def test_adopt_attaches_to_a_started_job_only(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief, worker = task(plan, CHIEF), task(plan, WORKER)
    runtime.start(chief)
    fake.pod_logs["default", pod_of(fake, CHIEF)] = "from the first line\n"
    successor = runtime_for(fake, plan)  # the next supervisor's
    assert successor.adopt(chief) is True and successor.adopt(worker) is False  # the worker's Job is still suspended
    assert successor.poll(chief) is None
    assert read_all(successor, chief, lambda lines: bool(lines)) == ["from the first line"]
    fake.finish_pod(pod_of(fake, CHIEF), 0)
    later(fake)
    assert successor.poll(chief) == 0


# --- stop ---------------------------------------------------------------------------------------------------------


def test_stop_deletes_the_pods_with_the_grace_and_returns_once_they_ended(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief, worker = task(plan, CHIEF), task(plan, WORKER)
    runtime.start(chief)
    runtime.start(worker)
    fake.on_sigterm[CHIEF] = OnSigterm(seconds=4, code=7)  # saves, then exits
    began = fake.now
    runtime.stop([chief, worker], 10)
    assert fake.now - began >= 4  # waited for the chief's save
    assert [p for p in fake.requests if p[0] == "DELETE" and "/pods/" in p[1] and "gracePeriodSeconds=10" in p[1]]
    assert all(p["status"]["phase"] not in ("Pending", "Running") for t in (CHIEF, WORKER) for p in pods(fake, t))
    later(fake)
    runtime.stop([chief, worker], 10)  # nothing runs: nothing to do
    assert sum(1 for p in fake.requests if p[0] == "DELETE") == 2


def test_stop_with_no_grace_still_gives_sigterm_a_second(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    runtime.stop([worker], 0)
    [deleted] = [p for method, p in fake.requests if method == "DELETE"]
    assert "gracePeriodSeconds=1" in deleted


def test_a_pod_that_will_not_end_is_a_launch_error_naming_it(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    pod = pod_of(fake, WORKER)
    fake.unreachable.add(pod)  # its node is gone: it stays terminating
    began = fake.now
    with pytest.raises(LaunchError, match=f"pods still running .* after their grace and after the last of the others "
                                          f"ended: {pod}"):
        runtime.stop([worker], 5)
    assert fake.now - began >= 5 + STOP_SLACK_SECONDS


def test_pods_ending_one_by_one_past_the_slack_are_waited_for_while_each_ends_within_it_of_the_last(
        fake: FakeKubernetes) -> None:
    """Many pods on slow kubelets (1,000 simulated pods stopped at once, issue 48): the slack counts from the last
    pod seen to end, so a stop that makes progress never fails; only a pod stuck that long is a launch error."""
    ends: dict[str, float] = {}

    def slow_kubelet(seconds: float) -> None:
        fake.now += seconds
        for pod, when in list(ends.items()):
            if fake.now >= when:
                fake.finish_pod(pod, 143)
                del ends[pod]

    plan, runtime = launched(fake, pause=slow_kubelet)
    chief, worker = task(plan, CHIEF), task(plan, WORKER)
    runtime.start(chief)
    runtime.start(worker)
    fake.unreachable.update((pod_of(fake, CHIEF), pod_of(fake, WORKER)))  # ended by this test's kubelet, late
    began = fake.now
    ends.update({pod_of(fake, CHIEF): began + 5 + STOP_SLACK_SECONDS * 0.8,
                 pod_of(fake, WORKER): began + 5 + STOP_SLACK_SECONDS * 1.6})
    runtime.stop([chief, worker], 5)  # the worker ends past grace + slack, within the slack of the chief's end
    assert not ends
    assert fake.now - began >= 5 + STOP_SLACK_SECONDS * 1.6


def test_stop_waits_for_a_process_that_ignores_sigterm_to_be_killed(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    fake.on_sigterm[WORKER] = IGNORES_SIGTERM
    began = fake.now
    runtime.stop([worker], 3)
    assert fake.now - began >= 3


# --- output, stacks -----------------------------------------------------------------------------------------------


def test_output_follows_the_log_drains_an_ended_pod_and_moves_to_the_next_run(fake: FakeKubernetes) -> None:
    plan, runtime = launched(fake)
    chief = task(plan, CHIEF)
    runtime.start(chief)
    key = ("default", pod_of(fake, CHIEF))
    fake.pod_logs[key] = "one\n"
    assert read_all(runtime, chief, lambda lines: lines == ["one"]) == ["one"]
    fake.pod_logs[key] += "two\nthree\n"
    fake.finish_pod(key[1], 1)
    later(fake)
    assert runtime.output(chief) == ["two", "three"]  # an ended pod's log is read to its end at once
    runtime.start(chief)
    fake.pod_logs["default", pod_of(fake, CHIEF)] = "second run\n"
    assert read_all(runtime, chief, lambda lines: bool(lines)) == ["second run"]
    runtime.close()


def served(dumps: dict[str, list[str]], token: str) -> tuple[dict[str, str], int, Callable[[], None]]:
    """Each task's stack endpoint (the worker's ``serve_stacks``) on a loopback address of its own, all on one port
    as in their pods: ``({task: ip}, port, stop)``; each answers its ``dumps`` lines."""
    ips = {name: f"127.0.44.{n}" for n, name in enumerate(dumps, 1)}
    servers, port = [], 0
    for name, lines in dumps.items():
        server = serve_stacks(token, port, dump=lambda lines=lines: "\n".join(lines) + "\n", host=ips[name])
        assert server is not None
        servers.append(server)
        port = server.server_address[1]

    def stop() -> None:
        for server in servers:
            server.shutdown()
            server.server_close()
    return ips, port, stop


@pytest.mark.parametrize("in_cluster", [True, False], ids=["pod-ip", "port-forward"])
def test_stacks_are_asked_of_the_tasks_stack_endpoint_not_through_exec(fake: FakeKubernetes, in_cluster: bool) -> None:
    """``read_stacks`` returns what the task agent's endpoint answers, at the pod's IP in the cluster, through a
    port-forward from outside; never ``pods/exec``. It reads every task so: the supervisor never signals one."""
    plan, _ = launched(fake)
    chief = task(plan, CHIEF)
    ips, port, stop = served({CHIEF: STUCK_IN_OP}, plan.event_token)
    fake.pod_ips = ips
    runtime = KubernetesRuntime(backend_for(fake).api, plan, "default", clock=lambda: fake.now, stacks_port=port,
                                in_cluster=in_cluster, objects=settled(fake))
    try:
        assert runtime.read_stacks(chief) is None  # not started: no pod to ask
        runtime.start(chief)
        fake.pod_ports["default", pod_of(fake, CHIEF), port] = (ips[CHIEF], port)
        assert runtime.read_stacks(chief) == "\n".join(STUCK_IN_OP) + "\n"
        assert isinstance(runtime, ReadsEveryStack) and not signalled(runtime, announced=True)
        fake.finish_pod(pod_of(fake, CHIEF), 0)
        later(fake)
        assert runtime.read_stacks(chief) is None  # an ended pod gives none
    finally:
        runtime.close()
        stop()
    assert not [path for _, path in fake.requests if "/exec" in path.split("?")[0]]


def test_a_task_that_serves_no_stacks_gives_none_and_says_why(fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    plan, _ = launched(fake)
    ips, port, stop = served({CHIEF: ["Thread 1"]}, "another run's token")
    fake.pod_ips = ips
    runtime = KubernetesRuntime(backend_for(fake).api, plan, "default", clock=lambda: fake.now, stacks_port=port,
                                in_cluster=True, objects=settled(fake))
    try:
        runtime.start(task(plan, CHIEF))
        assert runtime.read_stacks(task(plan, CHIEF)) is None
    finally:
        runtime.close()
        stop()
    assert f"no stacks of {CHIEF}: its stack endpoint ({ips[CHIEF]}:{port}) gave nothing" in caplog.text


# --- the one Supervisor over it -----------------------------------------------------------------------------------


#: The longest (real time) ``World`` holds its clock for what the programs wrote to reach the supervisor.
HOLD_SECONDS = 30.0


@dataclass
class World:
    """The supervisor's pause: a second of the fake's clock passes, then the test's script for that round runs
    (``script``: ``{round: action}``; ``each``: runs every round). ``caught_up``: until it says True, the fake's clock
    stands still (the supervisor polls again after a real 10 ms, for at most ``HOLD_SECONDS``): what the programs
    wrote reaches the supervisor through its followers' threads, in real time."""

    fake: FakeKubernetes
    script: dict[int, Callable[[FakeKubernetes], None]] = field(default_factory=dict)
    each: Callable[[FakeKubernetes], None] | None = None
    caught_up: Callable[[], bool] | None = None
    rounds: int = 0
    held_since: float | None = None

    def pause(self, seconds: float) -> None:
        if self.caught_up is not None and not self.caught_up():
            self.held_since = self.held_since or time.monotonic()
            assert time.monotonic() - self.held_since < HOLD_SECONDS, "what the programs wrote never reached it"
            time.sleep(0.01)
            return
        self.held_since = None
        self.rounds += 1
        assert self.rounds < 500, "the supervisor did not end"
        self.fake.now += max(seconds, 0.5)
        if self.rounds in self.script:
            self.script[self.rounds](self.fake)
        if self.each is not None:
            self.each(self.fake)


def supervise(fake: FakeKubernetes, world: World, spec: dict[str, Any] = SPEC) -> JobStatus:
    plan, runtime = launched(fake, spec)
    supervisor = Supervisor(plan, runtime,
                            tuning=Tuning(poll_seconds=0.5, linger_seconds=1.0, fault_pause=0.5, pause=world.pause, clock=lambda: fake.now))
    try:
        return supervisor.run()
    finally:
        runtime.close()


def ends(name: str, code: int) -> Callable[[FakeKubernetes], None]:
    """The task's current run exits ``code`` (if it runs)."""
    def act(fake: FakeKubernetes) -> None:
        pod = pod_of(fake, name)
        if fake.get("pods", pod)["status"]["phase"] == "Running":
            fake.finish_pod(pod, code)
    return act


def test_a_worker_crash_restarts_the_gang_and_the_run_succeeds(fake: FakeKubernetes) -> None:
    world = World(fake, {3: ends(WORKER, 137)})
    world.script[12] = ends(CHIEF, 0)
    status = supervise(fake, world)
    assert status.state is State.SUCCEEDED, status
    assert status.restarts == 1
    # each restart made fresh Jobs: both tasks ran twice, the chief's first run stopped with the gang
    assert [j for j in fake.list("jobs") if j["metadata"]["name"] in (CHIEF, WORKER) and j["spec"]["suspend"]] == []
    assert sum(1 for m, p in fake.requests if m == "POST" and p.endswith("/jobs")) == 2 + 2  # applied, then copies
    assert [m for m, p in fake.requests if m == "DELETE" and "/pods/" in p]  # the chief's run stopped with the gang


def test_the_restart_budget_spent_fails_the_run(fake: FakeKubernetes) -> None:
    world = World(fake, each=ends(WORKER, 137))
    status = supervise(fake, world)
    assert status.state is State.FAILED, status
    assert status.restarts == 2 and "137" in status.message, status.message
    assert all(p["status"]["phase"] not in ("Pending", "Running") for p in fake.list("pods"))  # no task left running


def test_an_exit_code_rule_that_fails_the_run_is_not_restarted(fake: FakeKubernetes) -> None:
    spec = {**SPEC, "restart": {"policy": "exit-code", "max_restarts": 2,
                                "rules": [{"exit_codes": [3], "action": "fail"}]}}
    world = World(fake, {3: ends(WORKER, 3)})
    status = supervise(fake, world, spec)
    assert status.state is State.FAILED and status.restarts == 0, status
    assert all(p["status"]["phase"] not in ("Pending", "Running") for p in fake.list("pods"))


def test_the_supervisors_role_allows_every_request_the_supervisor_makes(fake: FakeKubernetes) -> None:
    """The supervisor pod's own Role (``supervisor_objects.role_rules``): a gang restart, the status published, a stall's
    stacks kept; every request allowed, and each one naming an object within the rule's ``resourceNames``."""
    spec = {**SPEC, "kubernetes": {"supervisor": True}}
    plan, runtime = launched(fake, spec)
    rules = supervisor_objects.role_rules(plan)
    fake.allowed = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    named = {(r, v): set(rule["resourceNames"]) for rule in rules if "resourceNames" in rule
             for r in rule["resources"] for v in rule["verbs"]}
    since = len(fake.requests)
    store = ConfigMapStore(runtime.api, "rt", "default", in_pod=True)
    world = World(fake, {3: ends(WORKER, 137), 12: ends(CHIEF, 0)})
    supervisor = Supervisor(store.read_plan(), runtime, on_status=store.write_status, keep_stacks=store.keep_stacks,
                            tuning=Tuning(poll_seconds=0.5, linger_seconds=1.0, pause=world.pause, clock=lambda: fake.now))
    assert supervisor.run().state is State.SUCCEEDED
    assert store.keep_stacks(1, {CHIEF: "Thread 1"}) is not None
    assert store.read_status() is not None
    runtime.close()
    checked = 0
    for method, path in fake.requests[since:]:
        _, resource, verb = permission(method, path)
        parts = path.split("?")[0].strip("/").split("/")
        at = 5 if parts[0] == "api" else 6  # api/v1/namespaces/NS/PLURAL/NAME, apis/GROUP/VERSION/...
        if (resource, verb) in named and len(parts) > at:
            assert parts[at] in named[resource, verb], (method, path)
            checked += 1
    assert checked  # the Jobs read, patched and deleted by name, the ConfigMap read and updated


STUCK_IN_OP = ["Thread 0x00007f0000000001 (most recent call first):",
               '  File "/venv/lib/python3.11/site-packages/tensorflow/python/ops/script_ops.py", line 269 in __call__',
               "", "Current thread 0x00007f0000000002 (most recent call first):",
               '  File "/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute']
WAITING = ["Current thread 0x00007f0000000003 (most recent call first):", '  File "/x/execute.py", line 53 in quick_execute']


def test_a_stall_reads_each_pods_stacks_from_its_endpoint_within_the_role_names_the_stuck_task_and_restarts(
        fake: FakeKubernetes) -> None:
    """The programs declare the stacks handler and the chief reports a step, then nothing moves: the supervisor in
    its pod, with only its Role's rights, asks each pod's stack endpoint at its IP (the worker's server, answering
    the test's stacks), the worker stuck in a Python op is named, the gang restarts, and the run succeeds after;
    no request went to ``pods/exec``."""
    spec = {**SPEC, "stall": {"timeout_seconds": 1}, "kubernetes": {"supervisor": True}}
    plan, _ = launched(fake, spec)
    rules = supervisor_objects.role_rules(plan)
    fake.allowed = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    ips, port, stop = served({CHIEF: WAITING, WORKER: STUCK_IN_OP}, plan.event_token)
    fake.pod_ips = ips
    runtime = KubernetesRuntime(backend_for(fake).api, plan, "default", clock=lambda: fake.now,
                                pause=lambda seconds: setattr(fake, "now", fake.now + seconds), stacks_port=port,
                                in_cluster=True, objects=settled(fake))
    told: dict[str, str] = {}  # each pod that declared its handler: its task
    seen: set[str] = set()  # those whose declaration the supervisor read (the line after it is its last line)
    stepped: set[str] = set()
    first_chief = fake.get("jobs", CHIEF)["metadata"]["uid"]

    def caught_up() -> bool:
        lines = {task.name: task.last_line for task in supervisor.status().tasks}
        seen.update(pod for pod, task in told.items() if lines.get(task) == f"ready {pod}")
        return seen >= told.keys()

    def programs(fake: FakeKubernetes) -> None:
        for name in (CHIEF, WORKER):
            running = [p for p in pods(fake, name) if p["status"]["phase"] == "Running"]
            if not running or running[-1]["metadata"]["name"] in told:
                continue
            pod = running[-1]["metadata"]["name"]
            told[pod] = name
            write(fake, name, StacksOnSignal(signal=STACKS_SIGNAL.name, time=fake.now), token=plan.event_token)
            fake.pod_logs["default", pod] += f"ready {pod}\n"
        chief = pod_of(fake, CHIEF)
        if chief in seen and chief not in stepped:  # its first step, once the supervisor knows every handler
            stepped.add(chief)
            write(fake, CHIEF, Step(step=1, time=fake.now), token=plan.event_token)
        if fake.get("jobs", CHIEF)["metadata"]["uid"] != first_chief:
            ends(CHIEF, 0)(fake)  # the run after the restart finishes

    kept: list[tuple[int, dict[str, str | None]]] = []
    supervisor = Supervisor(plan, runtime, keep_stacks=lambda number, dumps: kept.append((number, dict(dumps))) or "here",
                            tuning=Tuning(poll_seconds=0.5, linger_seconds=1.0, stack_gap=0.5, clock=lambda: fake.now,
                                          pause=World(fake, each=programs, caught_up=caught_up).pause))
    try:
        status = supervisor.run()
    finally:
        runtime.close()
        stop()
    assert not [path for _, path in fake.requests if "/exec" in path.split("?")[0]]
    assert status.state is State.SUCCEEDED and status.restarts == 1, status
    assert status.stall is not None and status.stall.stalls == 1 and status.stall.suspects == [WORKER], status.stall
    assert status.stall.evidence is StallEvidence.STACKS_UNCHANGED
    [(number, dumps)] = kept
    assert number == 1 and "script_ops.py" in (dumps[WORKER] or "") and "quick_execute" in (dumps[CHIEF] or "")


# --- restarts in place (the pod's held agent) ----------------------------------------------------------------------


class FakeAgent:
    """A task's held agent (``launcher.worker.agent``) as the runtime sees it on its endpoint: the requests it got,
    its runs numbered from 1; ``stop`` ends the run under way with 0, ``start`` begins the next once it ended."""

    def __init__(self) -> None:
        self.state = AgentState(run=1)
        self.asked: list[agent_control.RequestKind] = []

    def control(self, request: Control) -> AgentState:
        self.asked.append(request.kind)
        if isinstance(request, agent_control.Stop) and self.state.running:
            self.state = AgentState(run=self.state.run, exit_code=0)
        elif isinstance(request, agent_control.Start) and not self.state.running:
            self.state = AgentState(run=self.state.run + 1)
            return self.state.model_copy(update={"started": True})
        return self.state


class AgentServer:
    """A ``FakeAgent`` on a real agent endpoint (``serve_stacks``) at ``host``, the address of ``task``'s pod, and a
    runtime of ``plan`` reaching it there (``runtime(...)``); ``close`` takes the endpoint down (the agent gone)."""

    def __init__(self, fake: FakeKubernetes, plan: Plan, task: str, host: str) -> None:
        self.agent = FakeAgent()
        server = serve_stacks(plan.event_token, 0, dump=lambda: "", host=host, control=self.agent.control)
        assert server is not None
        self.server, self.port, self.host, self._fake, self._plan = server, server.server_address[1], host, fake, plan
        fake.pod_ips = {task: host}

    def runtime(self, in_cluster: bool = True, **options: Any) -> KubernetesRuntime:
        fake = self._fake
        return KubernetesRuntime(backend_for(fake).api, self._plan, "default", clock=lambda: fake.now,
                                 stacks_port=self.port, in_cluster=in_cluster, objects=settled(fake), **options)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("in_cluster", [True, False], ids=["pod-ip", "port-forward"])
def test_a_restart_is_made_in_the_same_pod_by_its_agent_and_a_pod_whose_agent_is_gone_is_replaced(
        fake: FakeKubernetes, in_cluster: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's end comes from its agent's line in the pod's log (not shown as output), which wakes the supervisor
    (``wake_supervisor``: its end is decided now, not at the next round); ``start`` then has the
    agent begin the next run in the same pod of the same Job, ``stop`` has it end the run there (no pod deleted);
    ``close`` tells it to quit. Once its agent no longer answers, ``stop`` deletes the pod and ``start`` replaces
    the Job, as before."""
    woken: list[bool] = []
    monkeypatch.setattr(agent_log, "wake_supervisor", lambda: woken.append(True))
    plan, _ = launched(fake)
    chief = task(plan, CHIEF)
    served = AgentServer(fake, plan, CHIEF, "127.0.45.1")
    agent, port = served.agent, served.port
    runtime = served.runtime(in_cluster, pause=lambda seconds: setattr(fake, "now", fake.now + seconds))
    try:
        runtime.start(chief)
        [pod] = pods(fake, CHIEF)
        name, job_uid = pod["metadata"]["name"], fake.get("jobs", CHIEF)["metadata"]["uid"]
        fake.pod_ports["default", name, port] = ("127.0.45.1", port)
        agent.state = AgentState(run=1, exit_code=137, oom_killed=True)
        fake.pod_logs["default", name] = ("failing\n" + agent_control.exit_line(plan.event_token, agent.state) + "\n")
        wait_for_condition(lambda: runtime.poll(chief) is not None)
        wait_for_condition(lambda: woken == [True])  # once, right after the line was read
        assert runtime.poll(chief) == 137 and runtime.oom_killed(chief)  # the kernel's OOM killer, as its agent saw
        assert read_all(runtime, chief, lambda lines: bool(lines)) == ["failing"]  # the agent's line is not output
        runtime.start(chief)
        assert agent.asked[-1] is agent_control.RequestKind.START and agent.state == AgentState(run=2)
        assert [p["metadata"]["uid"] for p in pods(fake, CHIEF)] == [pod["metadata"]["uid"]]  # no new pod
        assert not runtime.placing(chief)  # its pod is bound: a run restarted in place waits for no place
        assert fake.get("jobs", CHIEF)["metadata"]["uid"] == job_uid
        later(fake)
        assert runtime.poll(chief) is None  # run 2 runs (the log says nothing of it yet)
        runtime.stop([chief], 5.0)
        assert agent.asked[-1] is agent_control.RequestKind.STOP and agent.state == AgentState(run=2, exit_code=0)
        assert pods(fake, CHIEF)[0]["metadata"].get("deletionTimestamp") is None  # stopped in place
        runtime.start(chief)
        assert agent.state == AgentState(run=3) and len(pods(fake, CHIEF)) == 1
        served.close()  # the agent is gone (its pod is not): the pod is deleted, the Job replaced
        runtime.stop([chief], 5.0)
        assert pods(fake, CHIEF) == [] or pods(fake, CHIEF)[0]["metadata"].get("deletionTimestamp")
        runtime.start(chief)
        assert fake.get("jobs", CHIEF)["metadata"]["uid"] != job_uid
    finally:
        runtime.close()
        served.close()


def test_close_tells_each_agent_whose_run_ended_to_quit(fake: FakeKubernetes) -> None:
    plan, _ = launched(fake)
    chief = task(plan, CHIEF)
    served = AgentServer(fake, plan, CHIEF, "127.0.45.2")
    runtime = served.runtime()
    try:
        runtime.start(chief)
        runtime.stop([chief], 1.0)
        runtime.close()
        assert served.agent.asked == [agent_control.RequestKind.STOP, agent_control.RequestKind.QUIT]
    finally:
        served.close()


def test_placing_while_a_started_tasks_pod_is_not_bound(fake: FakeKubernetes) -> None:
    """``Placing``: a task not started is not placing; one whose pod no node has room for is; one whose pod runs is
    not (the stall watchdog counts no silence while a run waits for room)."""
    sized = {"memory": "1Gi"}
    plan, runtime = launched(fake, {**SPEC, "roles": {"chief": {"resources": sized},
                                                      "worker": {"replicas": 1, "resources": sized}}})
    chief, worker = task(plan, CHIEF), task(plan, WORKER)
    assert isinstance(runtime, Placing) and not runtime.placing(worker)
    runtime.start(chief)
    assert not runtime.placing(chief)
    fake.node_memory = 2**29  # no room left: the next pod stays Pending, unschedulable
    runtime.start(worker)
    assert runtime.placing(worker) and not runtime.placing(chief)


def test_a_supervisor_that_never_saw_the_disruption_reads_it_from_the_failed_job(fake: FakeKubernetes) -> None:
    """A supervisor evicted in the same moment as its tasks: the next one finds each task's Job failed without a pod.
    The Job's condition says why (``manifests.DISRUPTED``: ``PodFailurePolicy``, the condition named): a preemption
    (143), not a lost run (137), so the group's restart spends no ``max_restarts``."""
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    runtime.start(worker)
    runtime.close()  # the supervisor is gone
    fake.evict(pod_of(fake, WORKER))
    later(fake)
    assert pods(fake, WORKER) == []
    successor = runtime_for(fake, plan)
    assert successor.adopt(worker) and successor.poll(worker) == 143
    assert any("disrupted by Kubernetes (DisruptionTarget) and is gone: taken as a preemption" in line
               for line in successor.output(worker))


def test_a_run_ended_in_place_in_a_pod_disrupted_since_is_a_preemption_also_once_only_its_job_says_so(
        fake: FakeKubernetes) -> None:
    """A successor adopts a held pod whose agent says its run ended (137: the kubelet's SIGKILL after the grace of
    an eviction); the pod is gone before a poll saw its ``DisruptionTarget``, its Job failed by
    ``manifests.DISRUPTED``: a preemption (143), as it is while the pod is still seen, not a lost run."""
    plan, runtime = launched(fake)
    worker = task(plan, WORKER)
    served = AgentServer(fake, plan, WORKER, "127.0.45.3")
    agent, successor = served.agent, served.runtime()
    try:
        runtime.start(worker)
        runtime.close()  # the supervisor is gone
        agent.state = AgentState(run=1, exit_code=137)
        assert successor.adopt(worker)  # its agent says run 1 ended
        fake.evict(pod_of(fake, WORKER))
        later(fake)
        assert pods(fake, WORKER) == []
        assert successor.poll(worker) == 143
        assert any("disrupted by Kubernetes (DisruptionTarget) and its run ended with 137: taken as a preemption"
                   in line for line in successor.output(worker))
    finally:
        successor.close()
        served.close()
