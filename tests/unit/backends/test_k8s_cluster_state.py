"""The run's record in its ConfigMap (``ConfigMapStore``) and what the backend makes of it: ``describe``
(the published status, pending before one, the supervisor's state, a pending task's reason), ``state_of``,
``host`` and ``cancel``; against the fake API server through the real client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fakes.kubernetes_api import FakeKubernetes, OnSigterm
from fakes.scripted_runtime import ScriptedRuntime
from helpers.k8s_fake import backend_for, fail_running_pods, settled
from helpers.k8s_specs import dry_run_for
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import backend as k8s_backend
from launcher.backends.kubernetes.backend import KUBE_FILE, KubernetesBackend
from launcher.backends.kubernetes.cluster_state import (
    STACKS_BYTES,
    STACKS_KEY,
    STATUS_KEY,
    STATUS_TEXT_CHARS,
    ConfigMapStore,
    plan_of,
    pod_state,
    status_text,
)
from launcher.backends.kubernetes.manifests import CONFIG_MAP_LIMIT
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.kubernetes.supervisor_objects import BACKOFF_LIMIT
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.protocol.exitcodes import ExitCode
from launcher.supervision import harness
from launcher.supervision.stack_dumps import NO_STACKS, bounded_text
from launcher.supervision.status import CLIP_MARK, JobStatus, State, SupervisorState, TaskStatus
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

SPEC: dict[str, Any] = {"name": "cs", "roles": {"chief": {}, "worker": {"replicas": 1}}}
CONFIG_MAP = naming.config_map_name("cs")


def applied(fake: FakeKubernetes, spec: dict[str, Any] = SPEC, run_id: str = "run-7") -> tuple[Plan, ConfigMapStore]:
    """The run's objects applied (with its supervisor Job, whose pod the fake's Job controller starts at once), and
    its record as the supervisor pod reads and writes it."""
    fake.job_controller = True
    dry_run = dry_run_for(spec, run_id)
    api = backend_for(fake).api
    apply.submit(api, dry_run, "default")
    return dry_run.plan, ConfigMapStore(api, "cs", "default", in_pod=True)


@pytest.fixture(autouse=True)
def _pod_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor pod's scratch space (its pid and log files) in the test's own directory."""
    monkeypatch.setattr("launcher.backends.kubernetes.cluster_state.TMP_DIR", str(tmp_path))


def status(state: State, **fields: Any) -> JobStatus:
    return JobStatus("cs", BackendKind.K8S, state, tasks=[TaskStatus("cs-chief-0", state)], **fields)


def test_plan_of_plans_the_run_again_from_its_config_map(fake: FakeKubernetes) -> None:
    plan, store = applied(fake)
    again = store.read_plan()
    assert again.run_id == plan.run_id == "run-7"
    assert [t.name for t in again.tasks] == [t.name for t in plan.tasks]
    assert again.event_token == plan.event_token and again.event_token
    assert plan_of(store.api, "cs", "default").tf_config(again.tasks[0]) == plan.tf_config(plan.tasks[0])


def test_the_status_round_trips_through_the_config_map_and_a_concurrent_write_is_retried(fake: FakeKubernetes) -> None:
    _, store = applied(fake)
    assert store.read_status() is None
    published = status(State.RUNNING, restarts=2, message="restarting")
    store.write_status(published)
    assert store.read_status() == published
    assert json.loads(fake.get("configmaps", CONFIG_MAP)["data"][STATUS_KEY])["restarts"] == 2
    fake.fail_next("PUT", "configmaps", 409)  # the launcher wrote the ConfigMap meanwhile
    store.write_status(status(State.SUCCEEDED))
    assert store.read_status().state is State.SUCCEEDED


def test_a_status_the_api_server_refuses_is_logged_and_the_supervisor_keeps_supervising(
        fake: FakeKubernetes, capsys: pytest.CaptureFixture[str]) -> None:
    """The supervisor pod's state write sits in its fault handling: a 422 (the ConfigMap too large) is one line in its
    log, the job runs to its end, and its end is what the ConfigMap then holds."""
    plan, store = applied(fake)
    fake.fail_next("PUT", "configmaps", 422)
    runtime = ScriptedRuntime({"cs-chief-0": [(5, 0)]})
    job = Supervisor(plan, runtime, on_status=store.write_status, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()
    assert job.state is State.SUCCEEDED, job.message
    assert store.read_status().state is State.SUCCEEDED
    err = capsys.readouterr().err
    assert err.count("supervisor: cannot publish the status") == 1 and "422" in err and "Traceback" not in err, err


def test_a_status_larger_than_the_config_map_holds_is_written_with_its_texts_cut(fake: FakeKubernetes) -> None:
    """Whatever the status says (here a megabyte message and task line), the ConfigMap stays within 1 MiB: the
    status's free texts are cut until it fits beside the run's description (and its stacks)."""
    _, store = applied(fake)
    store.keep_stacks(1, {"cs-chief-0": "Thread 1\n" + "  frame (train.py:1)\n" * 40_000})
    huge = status(State.FAILED, message="failed: last error: " + "E" * 1024 * 1024)
    huge.tasks[0].last_line = "L" * 1024 * 1024
    store.write_status(huge)
    data = fake.get("configmaps", CONFIG_MAP)["data"]
    assert sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) <= CONFIG_MAP_LIMIT
    written = store.read_status()
    assert written.state is State.FAILED and written.message.startswith("failed: last error: EEE")
    assert written.message.endswith(CLIP_MARK) and written.tasks[0].last_line.endswith(CLIP_MARK)
    assert len(written.message) <= STATUS_TEXT_CHARS[0]
    with pytest.raises(LaunchError, match="does not fit the 100 bytes"):
        status_text(huge, 100)


def test_a_stalls_stacks_go_to_the_pods_log_and_bounded_to_the_config_map(
        fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    _, store = applied(fake)
    dumps: dict[str, str | None] = {"cs-chief-0": "Thread 1\n" + "  frame (train.py:1)\n" * 40_000, "cs-worker-0": None}
    where = store.keep_stacks(3, dumps)
    kept = fake.get("configmaps", CONFIG_MAP)["data"][STACKS_KEY]
    assert len(kept.encode()) <= STACKS_BYTES
    assert "cs-chief-0" in kept and "cs-worker-0" in kept
    assert where is not None and f"ConfigMap {CONFIG_MAP} key {STACKS_KEY}" in where
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "stacks of cs-chief-0 at stall 3:" in logged and "stacks of cs-worker-0 at stall 3:\n(none" in logged
    store.keep_stacks(4, {"cs-chief-0": "Thread 1\n  later (train.py:9)\n"})  # the previous stall's replaced
    kept = fake.get("configmaps", CONFIG_MAP)["data"][STACKS_KEY]
    assert "later (train.py:9)" in kept and "frame (train.py:1)" not in kept


# --- describe -----------------------------------------------------------------------------------------------------


def test_describe_before_the_supervisor_published_is_pending_then_what_it_published(fake: FakeKubernetes) -> None:
    _, store = applied(fake)
    backend = backend_for(fake)
    shown = backend.describe("cs")
    assert shown is not None and shown.state is State.PENDING and shown.message == "waiting for its supervisor"
    assert shown.supervisor is SupervisorState.ALIVE  # its pod runs
    store.write_status(status(State.RUNNING, restarts=1))
    shown = backend.describe("cs")
    assert (shown.state, shown.restarts) == (State.RUNNING, 1)
    assert backend.describe("nothing") is None


def test_describe_says_the_supervisor_is_starting_or_lost(fake: FakeKubernetes) -> None:
    applied(fake)
    backend = backend_for(fake)
    [pod] = fake.list("pods", "default", {"job-name": naming.supervisor_name("cs")})
    fake.update("pods", "default", pod["metadata"]["name"], lambda p: p["status"].update(
        phase="Pending", containerStatuses=[{"name": "supervisor", "state": {"waiting": {"reason": "ContainerCreating"}}}]))
    assert backend.describe("cs").supervisor is SupervisorState.STARTING
    fake.update("pods", "default", pod["metadata"]["name"], lambda p: p["status"].update(containerStatuses=[], conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 Insufficient memory."}]))
    shown = backend.describe("cs")  # no node has the room for it: the scheduler's reason
    assert (shown.supervisor, shown.supervisor_note) == (
        SupervisorState.STARTING, f"{pod['metadata']['name']}: Unschedulable: 0/1 nodes are available: 1 Insufficient memory.")
    fake.update("pods", "default", pod["metadata"]["name"], lambda p: p["status"].update(
        containerStatuses=[{"name": "supervisor", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]))
    shown = backend.describe("cs")
    assert shown.supervisor is SupervisorState.LOST and "ImagePullBackOff" in shown.supervisor_note
    fake.finish_pod(pod["metadata"]["name"], 1)
    assert backend.describe("cs").supervisor is SupervisorState.ALIVE  # its Job ran the next supervisor pod
    fail_running_pods(fake, naming.supervisor_name("cs"), BACKOFF_LIMIT)  # each fails in turn, until its Job gives up
    shown = backend.describe("cs")
    assert shown.supervisor is SupervisorState.LOST and "BackoffLimitExceeded" in shown.supervisor_note, shown


def test_describe_says_a_supervisor_that_moves_is_starting_not_lost(fake: FakeKubernetes) -> None:
    """Its pod deleted (a drain, ``kubectl delete``): while that pod leaves, none runs, and its Job makes the next:
    the run is not without a supervisor."""
    fake.on_sigterm[naming.supervisor_name("cs")] = OnSigterm(seconds=1)  # it leaves the tasks to the next one
    applied(fake)
    backend = backend_for(fake)
    [pod] = fake.list("pods", "default", {"job-name": naming.supervisor_name("cs")})
    fake.delete("pods", "default", pod["metadata"]["name"], "Background")
    assert fake.get("pods", pod["metadata"]["name"])["metadata"].get("deletionTimestamp")
    shown = backend.describe("cs")
    assert shown.supervisor is SupervisorState.STARTING and "its Job makes the next" in shown.supervisor_note, shown


@pytest.mark.parametrize(("exit_code", "disrupted"), [(int(ExitCode.PREEMPTED), False), (137, True)],
                         ids=["it left on SIGTERM", "its pod was disrupted"])
def test_a_supervisor_that_moved_is_replaced_without_spending_its_jobs_budget(fake: FakeKubernetes, exit_code: int,
                                                                              disrupted: bool) -> None:
    """Node drains and deleted pods are moves, not failures: more of them than ``BACKOFF_LIMIT`` leave it supervised."""
    applied(fake)
    backend = backend_for(fake)
    supervisor = {"job-name": naming.supervisor_name("cs")}
    for _ in range(BACKOFF_LIMIT + 2):
        [running] = [p for p in fake.list("pods", "default", supervisor) if p["status"]["phase"] == "Running"]
        fake.finish_pod(running["metadata"]["name"], exit_code, disrupted=disrupted)
    assert backend.describe("cs").supervisor is SupervisorState.ALIVE
    assert fake.get("jobs", naming.supervisor_name("cs"))["status"].get("failed", 0) == 0
    [running] = [p for p in fake.list("pods", "default", supervisor) if p["status"]["phase"] == "Running"]
    fake.finish_pod(running["metadata"]["name"], 1)  # a failure still counts
    assert fake.get("jobs", naming.supervisor_name("cs"))["status"]["failed"] == 1


def test_describe_says_why_a_tasks_pod_waits(fake: FakeKubernetes) -> None:
    plan, store = applied(fake)
    runtime = KubernetesRuntime(store.api, plan, "default", clock=lambda: fake.now, objects=settled(fake))
    runtime.start(next(t for t in plan.tasks if t.name == "cs-worker-0"))
    store.write_status(JobStatus("cs", BackendKind.K8S, State.RUNNING,
                                 tasks=[TaskStatus(t.name, State.RUNNING) for t in plan.tasks]))
    [pod] = fake.list("pods", "default", {"job-name": "cs-worker-0"})
    fake.update("pods", "default", pod["metadata"]["name"], lambda p: p["status"].update(
        phase="Pending", containerStatuses=[], conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                            "message": "0/1 nodes are available: insufficient cpu"}]))
    shown = backend_for(fake).describe("cs")
    tasks = {t.name: (t.state, t.message) for t in shown.tasks}
    assert tasks["cs-worker-0"] == (State.PENDING, "pending: Unschedulable: 0/1 nodes are available: insufficient cpu")
    assert tasks["cs-chief-0"][0] is State.RUNNING and not tasks["cs-chief-0"][1].startswith("pending")
    # the run waits for room, with the scheduler's reason: in `status`, `-o json` and the live view alike
    assert (shown.state, shown.message) == (State.PENDING, "pending: cs-worker-0 cannot be placed: Unschedulable: "
                                                           "0/1 nodes are available: insufficient cpu")
    assert shown.to_dict()["state"] == "pending"
    fake.update("pods", "default", pod["metadata"]["name"], lambda p: p["status"].update(
        conditions=[{"type": "PodScheduled", "status": "True"}],
        containerStatuses=[{"name": "tensorflow", "state": {"waiting": {"reason": "ContainerCreating"}}}]))
    shown = backend_for(fake).describe("cs")  # placed, its image being pulled: the run runs, the task starts
    assert shown.state is State.RUNNING and {t.name: t.state for t in shown.tasks}["cs-worker-0"] is State.PENDING


def test_describe_reads_whole_only_the_pods_that_wait_and_the_jobs_only_while_one_has_no_pod(fake: FakeKubernetes) -> None:
    """``status`` of a run of a thousand tasks costs what waits, not what runs: the task pods it reads whole are the
    Pending ones (a field selector), every other pod and every Job only by its metadata; the Jobs whole only while
    one of them has no pod (``podless``: why the API server refuses it)."""
    plan, store = applied(fake)
    store.write_status(JobStatus("cs", BackendKind.K8S, State.RUNNING,
                                 tasks=[TaskStatus(t.name, State.RUNNING) for t in plan.tasks]))

    def whole_task_lists() -> list[tuple[str, str]]:
        """(plural, field selector) of each LIST of the run's task objects ``describe`` read whole."""
        start = len(fake.listed)
        backend_for(fake).describe("cs")
        return [(plural, fields) for plural, labels, fields, metadata_only in fake.listed[start:]
                if f"{naming.LABEL_CLUSTER}=cs" in labels and not metadata_only]

    assert whole_task_lists() == [("pods", "status.phase=Pending"), ("jobs", "")]  # suspended Jobs: no pod yet
    runtime = KubernetesRuntime(store.api, plan, "default", clock=lambda: fake.now, objects=settled(fake))
    for task in plan.tasks:
        runtime.start(task)
    assert whole_task_lists() == [("pods", "status.phase=Pending")]  # every task runs: none of its pods is read whole


def test_describe_of_a_run_supervised_from_this_machine_says_whether_its_process_lives(fake: FakeKubernetes) -> None:
    applied(fake, {**SPEC, "kubernetes": {"supervisor": False}})
    local = harness.StateDir.of(BackendKind.K8S, "cs")
    local.create(plan_of(backend_for(fake).api, "cs", "default"))
    shown = backend_for(fake).describe("cs")
    assert shown.supervisor is SupervisorState.LOST and shown.supervisor_note == "its process on this machine is gone"


# --- state_of, host, cancel ---------------------------------------------------------------------------------------


def test_state_of_names_the_pods_state_or_a_state_dir_on_this_machine(
        fake: FakeKubernetes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contexts: list[str | None] = []

    def connect(context: str | None) -> Any:
        contexts.append(context)
        return _client(fake)

    monkeypatch.setattr(k8s_backend, "connect", connect)
    in_pod = KubernetesBackend.state_of("team-a/cs")
    assert isinstance(in_pod.record, ConfigMapStore) and in_pod.record.in_pod
    assert (in_pod.record.name, in_pod.record.namespace) == ("cs", "team-a")
    assert in_pod.root == tmp_path / "tfcluster-supervisor" / "cs" and in_pod.root.is_dir()  # the pod's scratch space
    (tmp_path / KUBE_FILE).write_text(json.dumps({"name": "cs", "namespace": "team-b", "context": "kind-x"}))
    here = KubernetesBackend.state_of(str(tmp_path))
    assert isinstance(here.record, ConfigMapStore) and not here.record.in_pod
    assert (here.root, here.record.name, here.record.namespace) == (tmp_path, "cs", "team-b")
    assert contexts == [None, "kind-x"]


def _client(fake: FakeKubernetes) -> Any:
    from kubernetes import client

    return client.ApiClient(client.Configuration(host=fake.url))


def test_host_leaves_the_tasks_on_sigterm_only_in_the_pod_and_a_run_over_has_nothing_to_do(
        fake: FakeKubernetes, tmp_path: Path) -> None:
    plan, store = applied(fake)
    in_pod = pod_state(store.api, "cs", "default")
    hosted = KubernetesBackend.host(plan, in_pod, adopt=True)
    assert isinstance(hosted.runtime, KubernetesRuntime) and hosted.leave_on_sigterm is True
    here = harness.StateDir(tmp_path, record=ConfigMapStore(store.api, "cs", "default", in_pod=False))
    assert KubernetesBackend.host(plan, here, adopt=False).leave_on_sigterm is False
    store.write_status(status(State.SUCCEEDED))
    with pytest.raises(harness.NothingToDo, match="the run is over"):
        KubernetesBackend.host(plan, in_pod, adopt=True)
    with pytest.raises(harness.CannotRun):
        KubernetesBackend.host(plan, harness.StateDir(tmp_path), adopt=False)


def test_cancel_deletes_the_supervisor_first_then_everything_of_the_run(fake: FakeKubernetes) -> None:
    applied(fake)
    backend_for(fake).cancel("cs")
    jobs = [name for plural, name, _ in fake.deletions if plural == "jobs"]
    assert jobs[0] == naming.supervisor_name("cs") and set(jobs[1:]) == {"cs-chief-0", "cs-worker-0"}
    assert fake.list("pods") == [] and fake.list("jobs") == [] and fake.list("configmaps") == []


def test_the_stacks_text_keeps_each_tasks_share_within_the_limit() -> None:
    """What ``keep_stacks`` writes to the ConfigMap (``stack_dumps.bounded_text``): never above its room."""
    dumps = {"a": "x" * 1000, "b": None, "c": "short\n"}
    for limit in (0, 10, 60, 200, 5000):
        assert len(bounded_text(3, dumps, limit).encode()) <= limit
    assert bounded_text(3, dumps, 5000) == "== a (stall 3)\n" + "x" * 1000 + "\n== b (stall 3)\n" + NO_STACKS + "\n== c (stall 3)\nshort\n"
    assert "... cut: 1001 bytes, the first kept" in bounded_text(3, dumps, 600)
