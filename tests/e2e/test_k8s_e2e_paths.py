"""The paths of issue 34 on a real Kubernetes cluster that ``test_k8s_e2e.py`` does not walk: required under CI like it.

A worker pod deleted gracefully (one preemption, a coordinated save, the
restart budget untouched; the deleted pod is replaced, the others restart in place), a worker killed with
``kill -9`` (the group restarts in place: the same pods, from its backup, issue 47), ParameterServer whose
servers the supervisor stops once the chief is done, ``down`` and
``down --volumes`` leaving nothing of tfcluster's, ``logs -f`` and ``debug``
on a running job, a Kubeflow TFJob through ``up``, ``run`` of a script whose
workspace layer is pushed to ``$TFCLUSTER_REGISTRY``. Same environment, skip
rules, image, helpers (``helpers.k8s_e2e``) and fixtures (conftest.py) as
``test_k8s_e2e.py``; every run is named ``ep-*`` and this session's suffix
(``run_name``) and is taken down by the fixture that made it, whatever the test did.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.k8s_e2e import (
    cli,
    demo_plan,
    kill_9_task,
    left_of,
    namespace,
    registry,
    run_in,
    run_name,
    stuck_input_plan,
    supervise_until,
    until,
)
from helpers.required import unavailable
from helpers.task_events import read_events
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.cli.report.timeline import TimelineKind, timeline
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.protocol import agent_control
from launcher.protocol.events import EventKind
from launcher.spec.models import RoleType
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e


#: Seconds worker 1 holds each batch of its first attempt after its 20th (``stuck_input``'s ``hold_seconds``), of
#: 60: that attempt's last 40 steps take 40 s at least, the window for a deletion to land and its coordinated save
#: (~10 steps here) to be made, as a 600-step run of the demo gave (on an idle host 60 steps ended, 2 s, before the
#: deletion landed); the restarted attempt runs at full speed.
HOLD_SECONDS = 1


def test_a_worker_pod_deleted_gracefully_is_one_preemption_saved_and_resumed(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core, tmp_path: Path
) -> None:
    """Worker 1's pod deleted (its grace) once worker 1 holds its batches (``HOLD_SECONDS``; the stall watchdog
    only warns, so the deletion is the one interruption): one preemption, no restart, the chief saved at a step and
    the next gang restored from it."""
    pushed_to = registry()
    if not pushed_to:
        unavailable("needs TFCLUSTER_REGISTRY: a registry the cluster's nodes pull from (.ci/k8s.sh exports it)", "e2e")
    name = run_name("ep-preempt")
    plan = stuck_input_plan(name, tmp_path, pushed_to, stall={"action": "warn"}, epochs=3, block_after=20,
                            hold_seconds=HOLD_SECONDS)
    launch(plan)
    supervise_until(backend, name, lambda s: (s.progress.step or 0) >= 10)
    pods = core.list_namespaced_pod(namespace(), label_selector=f"tfcluster.io/cluster={name}").items
    victim = next(p.metadata.name for p in pods if p.metadata.name.startswith(f"{name}-worker-1-"))
    first_chief = next(p.metadata.name for p in pods if p.metadata.name.startswith(f"{name}-chief-0-"))
    held(core, victim, plan)
    # the supervisor replaces the group's Jobs (their pods go with them): read the first chief's log as it comes
    first_log = PodLog(core, first_chief)
    core.delete_namespaced_pod(victim, namespace())  # graceful: SIGTERM, then the pod's grace to save

    status = supervise_until(backend, name, lambda s: s.state.terminal)

    assert status.state is State.SUCCEEDED, status
    assert (status.preemptions, status.restarts) == (1, 0), status  # the restart budget untouched
    saved = read_events(first_log.lines(), plan.event_token)
    preempted = [e for e in saved if e.event is EventKind.PREEMPTED]
    assert preempted and preempted[-1].step, saved  # the chief saved when the group was stopped
    resumed = read_events(backend.logs(name, f"{name}-chief-0"), plan.event_token)
    restored = [e for e in resumed if e.event is EventKind.RESTORED]
    assert [e.step for e in restored] == [preempted[-1].step], resumed  # and the next gang started from that step
    assert any(e.event is EventKind.FINISHED for e in resumed)


def test_a_killed_worker_restarts_in_place_in_the_same_pods_and_the_run_succeeds_from_its_backup(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core, tmp_path: Path
) -> None:
    """``kill -9`` of worker 1's program: the supervisor restarts the group through each pod's agent, so no pod is
    made (the same names and UIDs, the kubelet restarted no container), each agent's run 2 becomes its standby
    (TensorFlow already imported), and the chief restores the backup.

    The first attempt cannot end before the kill: worker 1 blocks in its input pipeline after 20 batches (its peers
    in the all-reduce) and is killed there, once backed up; the stall watchdog only warns, so the kill is the one
    restart. The restarted attempt does not block and ends soon after the restore."""
    pushed_to = registry()
    if not pushed_to:
        unavailable("needs TFCLUSTER_REGISTRY: a registry the cluster's nodes pull from (.ci/k8s.sh exports it)", "e2e")
    name = run_name("ep-inplace")
    plan = stuck_input_plan(name, tmp_path, pushed_to, stall={"action": "warn"}, block_after=20)
    launch(plan)
    supervise_until(backend, name, lambda s: (s.progress.step or 0) >= 10)  # backed up (every 5 steps)
    tasks = (f"{name}-chief-0", f"{name}-worker-0", f"{name}-worker-1")

    def task_pods() -> list[Any]:
        pods = core.list_namespaced_pod(namespace(), label_selector=f"tfcluster.io/cluster={name}").items
        return [p for p in pods if p.metadata.name.startswith(tuple(f"{t}-" for t in tasks))]

    before = {p.metadata.name: p.metadata.uid for p in task_pods()}
    victim = next(pod for pod in before if pod.startswith(f"{name}-worker-1-"))
    held(core, victim, plan)
    assert kill_9_task(core, victim)[1].strip() == "killed"

    status = supervise_until(backend, name, lambda s: s.state.terminal)

    assert status.state is State.SUCCEEDED, status
    assert (status.restarts, status.preemptions) == (1, 0), status
    after = task_pods()
    assert {p.metadata.name: p.metadata.uid for p in after} == before  # no new pod
    assert all(c.restart_count == 0 for p in after for c in p.status.container_statuses or [])
    for task in tasks:
        lines = list(backend.logs(name, task))
        runs = [state for line in lines if (state := agent_control.read_exit(line, plan.event_token))]
        assert [state.run for state in runs] == [1, 2], (task, runs)  # the agent's own restart: run 2, its last
        assert runs[-1].exit_code == 0 and (runs[0].exit_code == 137 or not task.endswith("worker-1")), (task, runs)
        warm = [e for e in read_events(lines, plan.event_token) if e.event is EventKind.WARM_START]
        assert len(warm) == 1, (task, warm)  # run 2 became the standby
    resumed = read_events(backend.logs(name, f"{name}-chief-0"), plan.event_token)
    restored = [e for e in resumed if e.event is EventKind.RESTORED]
    assert restored and restored[-1].step, resumed
    assert status.goodput is not None and status.goodput.lost_seconds.restarts > 0, status.goodput  # its cost
    history = backend.history(name)
    assert history is not None
    lanes = {lane.task: lane for lane in timeline(history).lanes}
    assert "restart 1" in [span.label for span in lanes[f"{name}-chief-0"].spans if span.kind is TimelineKind.RESTART]


def held(core: Any, pod: str, plan: Plan) -> None:
    """Until worker 1's ``pod`` reached its block in ``stuck_input`` (the marker it makes there exists)."""
    marker = plan.spec.training.args["marker"]
    until("worker 1 held in its input pipeline (its marker made)",
          lambda: run_in(core, pod, f"import os; print(os.path.exists({marker!r}))")[1].strip() == "True")


class PodLog:
    """One pod's log, followed in a thread from now until its container ends (the pod may be deleted later)."""

    def __init__(self, core: Any, pod: str) -> None:
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._follow, args=(core, pod), daemon=True)
        self._thread.start()

    def _follow(self, core: Any, pod: str) -> None:
        stream = core.read_namespaced_pod_log(pod, namespace(), container=CONTAINER, follow=True,
                                              _preload_content=False)
        self._lines.extend(line.decode(errors="replace") for line in stream.stream())

    def lines(self, timeout: float = 300) -> list[str]:
        """Every line of the log, once it ended (``timeout``: a bound; the test has seen the run end by then)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the pod's log did not end"
        return "".join(self._lines).splitlines()


def variant(name: str, **changes: Any) -> Plan:
    """``demo_plan(name)`` with top-level spec fields replaced (its image, claim, budget and deadline kept)."""
    data = demo_plan(name).spec.model_dump(mode="json", exclude_unset=True)
    return api.plan(validate_data({**data, **changes}), "k8s", api.new_run_id())


def wait_until(check: Callable[[], Any], timeout: float = 300) -> Any:
    """``check()`` once it is truthy (polled every second), else the test fails with its last value."""
    deadline = time.monotonic() + timeout
    value = check()
    while not value and time.monotonic() < deadline:
        time.sleep(1)
        value = check()
    assert value, value
    return value


def test_parameter_server_with_two_ps_succeeds_and_its_servers_are_stopped(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core
) -> None:
    name = run_name("ep-pss")
    launch(variant(name, strategy="parameter_server", roles={"chief": {}, "worker": {"replicas": 2},
                                                              "ps": {"replicas": 2}},
                   checkpoint={"backup_every_steps": None}))  # PSS backs up per epoch only
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    assert status.progress.step == 60, status.progress

    ps = [t for t in status.tasks if f"-{RoleType.PS.value}-" in t.name]
    assert len(ps) == 2 and all(t.state.terminal for t in ps), status.tasks  # stopped once the chief was done

    def ps_pods_left() -> list[str]:
        pods = core.list_namespaced_pod(namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name},"
                                                                  f"{naming.LABEL_ROLE}={RoleType.PS.value}").items
        return [p.metadata.name for p in pods if p.status.phase in ("Pending", "Running")]

    wait_until(lambda: not ps_pods_left())  # no server runs on after the job ended


def test_down_leaves_the_claim_and_down_volumes_nothing_of_the_run_and_no_one_elses(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core
) -> None:
    name = run_name("ep-down")
    from kubernetes import client

    launch(variant(name))
    supervise_until(backend, name, lambda s: s.state is State.RUNNING)
    # a user's own object next to the run: the run's name, no tfcluster label
    mine = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"{name}-notes"), data={"k": "v"})
    core.create_namespaced_config_map(namespace(), mine)
    try:
        assert left_of(name, core)
        backend.cancel(name)
        wait_until(lambda: backend.describe(name) is None)
        wait_until(lambda: left_of(name, core) == [f"persistent_volume_claim/{name}-checkpoints"])
        backend.cancel(name, volumes=True)
        wait_until(lambda: not left_of(name, core))
        assert core.read_namespaced_config_map(f"{name}-notes", namespace()).data == {"k": "v"}
    finally:
        core.delete_namespaced_config_map(f"{name}-notes", namespace())


def test_logs_follow_and_debug_stacks_on_a_running_job(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core
) -> None:
    name = run_name("ep-live")
    plan = variant(name, training={"epochs": 4, "steps_per_epoch": 60, "batch_size_per_replica": 16})
    launch(plan)
    supervise_until(backend, name, lambda s: s.state is State.RUNNING)
    followed = backend.logs(name, follow=True)  # at once: a pod still starting is followed once its container runs
    seen: list[str] = []
    for line in followed:  # lines of every task as they come, until the chief reports a step
        seen.append(line)
        events = read_events([line.partition(" | ")[2]], plan.event_token)
        if line.startswith(f"{name}-chief-0 | ") and any(e.event is EventKind.STEP for e in events):
            break
    followed.close()
    assert {line.partition(" | ")[0] for line in seen} >= {f"{name}-chief-0"}, seen[-5:]
    stacks = backend.stacks(name)
    assert set(stacks) == {f"{name}-chief-0", f"{name}-worker-0", f"{name}-worker-1"}, stacks
    for task, dump in stacks.items():
        assert dump and "launcher/worker" in dump, (task, dump)


PROBE = "import json, os; t = json.loads(os.environ['TF_CONFIG'])['task']; print('probe', t['type'], t['index'], flush=True)"


def test_a_kubeflow_tfjob_file_runs_through_up(tmp_path: Path, taken_down: list[str]) -> None:
    name = run_name("ep-tfjob")
    container = {"name": "tensorflow", "image": demo_plan(name).spec.image, "command": ["python", "-c", PROBE]}
    tfjob = {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name, "namespace": namespace()},
        "spec": {"successPolicy": "AllWorkers",  # both workers' logs stay to read
                 "tfReplicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "Never",
                                               "template": {"spec": {"containers": [container]}}}}},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(tfjob))
    taken_down.append(name)
    up = cli("up", "job.yaml", "-b", "k8s", cwd=tmp_path)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    for index in (0, 1):
        logs = cli("logs", name, f"{name}-worker-{index}", cwd=tmp_path)
        assert [line for line in logs.stdout.splitlines() if line.startswith("probe")] == [f"probe worker {index}"], logs


def test_run_pushes_the_workspace_layer_to_the_registry_and_runs_an_unmodified_script(
    tmp_path: Path, taken_down: list[str]
) -> None:
    pushed_to = registry()
    if not pushed_to:
        unavailable("needs TFCLUSTER_REGISTRY: a registry the cluster's nodes pull from (.ci/k8s.sh exports it)", "e2e")
    name = run_name("ep-run")
    (tmp_path / "train.py").write_text(f"{PROBE}\nprint('shipped', open('data.txt').read(), flush=True)\n")
    (tmp_path / "data.txt").write_text("beside the script")
    taken_down.append(name)
    run = cli("run", "-b", "k8s", "--namespace", namespace(), "--name", name, "--workers", "2",
              "--image", demo_plan(name).spec.image, "train.py", cwd=tmp_path, registry=pushed_to)  # --registry's default
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    logs = cli("logs", name, f"{name}-worker-0", cwd=tmp_path).stdout.splitlines()  # the lead, whose exit decides
    assert [line for line in logs if line.startswith(("probe", "shipped"))] == [
        "probe worker 0", "shipped beside the script"], logs
