"""The demo on a real Kubernetes cluster (>= 1.33): required under CI (scripts/test.sh starts .ci/k8s.sh's cluster
in the background and these run last, tests/conftest.py), elsewhere skipped unless TFCLUSTER_E2E_KUBECONFIG is set.

What only this covers: scheduling, pod DNS (``<task>.<cluster>``), the real
Job controller (backoffLimitPerIndex, podFailurePolicy, podReplacementPolicy),
the NetworkPolicy letting the TF ports through, a ReadWriteMany claim shared
by all tasks, real training with a gang restart, and TensorBoard pods
reading the runs' claims (one run, and two runs on one shared board).

Environment: TFCLUSTER_E2E_KUBECONFIG (path), TFCLUSTER_E2E_IMAGE (the
worker image, pullable by the cluster; default tfcluster-worker:latest),
TFCLUSTER_E2E_NAMESPACE (default: the kubeconfig context's, helpers.k8s_e2e), TFCLUSTER_E2E_STORAGE_CLASS
(a ReadWriteMany class, e.g. nfs-client; default: the cluster's default).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from helpers.boards import free_port, scalar_curves
from helpers.k8s_e2e import demo_plan, image, kubeconfig, namespace, supervise_until
from helpers.task_events import read_events
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.plan import naming
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

#: Run in a task's container (pods/exec): SIGKILL to each child of PID 1 (the image's tini), i.e. the worker's process.
KILL_9_WORKER = """
import os, signal
children = [int(p) for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().rpartition(")")[2].split()[1] == "1"]
for pid in children:
    os.kill(pid, signal.SIGKILL)
print("killed" if children else "no child of PID 1")
"""
#: Two small runs shown on one TensorBoard, each read from its own claim.
BOARD_RUNS = ("e2e-board-a", "e2e-board-b")


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[KubernetesBackend]:
    monkeypatch.setenv("KUBECONFIG", kubeconfig())
    runner = KubernetesBackend.create(KubernetesOptions(namespace=namespace()))
    yield runner
    for name in ("e2e-demo", "e2e-gang", "e2e-own", *BOARD_RUNS):
        runner.cancel(name, volumes=True)


def test_demo_trains_to_success_and_goes_away(backend: KubernetesBackend) -> None:
    plan = demo_plan("e2e-demo")
    backend.submit(KubernetesBackend.dry_run(plan))
    status = supervise_until(backend, "e2e-demo", lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    events = read_events(backend.logs("e2e-demo", "e2e-demo-chief-0"), plan.event_token)
    assert any(e.event == "finished" for e in events)
    port = free_port()  # the run's TensorBoard Deployment, through a real port-forward
    with backend.tensorboard(["e2e-demo"], "127.0.0.1", port) as board:
        curves = scalar_curves(board.url, ["e2e-demo/train"], "loss", timeout=300)
        assert [int(step) for _, step, _ in curves["e2e-demo/train"]][-1] == 60
    backend.cancel("e2e-demo")
    supervise_gone = time.monotonic() + 120
    while backend.describe("e2e-demo") is not None and time.monotonic() < supervise_gone:
        time.sleep(2)
    assert backend.describe("e2e-demo") is None


def test_killed_worker_restarts_the_gang_and_resumes(backend: KubernetesBackend) -> None:
    backend.submit(KubernetesBackend.dry_run(demo_plan("e2e-gang")))
    supervise_until(backend, "e2e-gang", lambda s: (s.progress.step or 0) >= 10)
    from kubernetes import client, config
    from kubernetes.stream import stream

    core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig()))
    pods = core.list_namespaced_pod(namespace(), label_selector="tfcluster.io/cluster=e2e-gang").items
    victim = next(p.metadata.name for p in pods if p.metadata.name.startswith("e2e-gang-worker-1-") and p.status.phase == "Running")
    # kill -9 of the worker's process (a crash, not a pod deletion: a real kubelet gives a deleted pod SIGTERM and at
    # least 2 s, a preemption). PID 1 is the image's tini, which no signal from inside its namespace kills: the worker
    # is its child, and tini then exits 128 + 9.
    ran = stream(core.connect_get_namespaced_pod_exec, victim, namespace(), container=CONTAINER, command=["python", "-c", KILL_9_WORKER],
                 stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
    ran.run_forever(timeout=60)
    assert ran.returncode == 0, (ran.returncode, ran.read_stdout(), ran.read_stderr())
    assert ran.read_stdout().split() == ["killed"], ran.read_stdout()
    status = supervise_until(backend, "e2e-gang", lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    assert status.restarts >= 1, status
    assert status.preemptions == 0, status


def test_a_user_program_on_workers_sees_its_volume_and_who_leads(backend: KubernetesBackend) -> None:
    # a real kubelet's configMap volume also holds its atomic writer's `..data` link and `..<time>` dir
    probe = ("import os; print('probe', os.environ['TFCLUSTER_IS_CHIEF'], "
             "sorted(n for n in os.listdir('/data') if not n.startswith('..')), flush=True)")
    spec = validate_data({
        "name": "e2e-own",
        "image": image(),
        "command": ["python", "-c", probe],
        "roles": {"worker": {"replicas": 2}},
        "restart": {"policy": "never"},
        "success_policy": "all-workers",
        "kubernetes": {
            "namespace": namespace(),
            "volumes": [{"name": "data", "configMap": {"name": "e2e-own-tfconfig", "items": [{"key": "job.json",
                                                                                           "path": "job.json"}]}}],
            "volume_mounts": [{"name": "data", "mount_path": "/data", "read_only": True}],
        },
    })
    backend.submit(KubernetesBackend.dry_run(api.plan(spec, "k8s", api.new_run_id())))
    status = supervise_until(backend, "e2e-own", lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    for index, lead in ((0, "1"), (1, "0")):
        lines = [line for line in backend.logs("e2e-own", f"e2e-own-worker-{index}") if line.startswith("probe")]
        assert lines == [f"probe {lead} ['job.json']"], lines


def test_two_runs_side_by_side_on_one_board_read_from_their_claims(backend: KubernetesBackend) -> None:
    for name in BOARD_RUNS:
        backend.submit(KubernetesBackend.dry_run(demo_plan(name, workers=1)))
    for name in BOARD_RUNS:
        status = supervise_until(backend, name, lambda s: s.state.terminal)
        assert status.state is State.SUCCEEDED, status
    port = free_port()  # one TensorBoard Deployment mounting both claims, through a real port-forward
    with backend.tensorboard(list(BOARD_RUNS), "127.0.0.1", port) as board:
        curves = scalar_curves(board.url, [f"{name}/train" for name in BOARD_RUNS], "loss", timeout=300)
        for name in BOARD_RUNS:
            assert [int(step) for _, step, _ in curves[f"{name}/train"]][-1] == 60, name
    from kubernetes import client, config

    apps = client.AppsV1Api(config.new_client_from_config(config_file=kubeconfig()))
    shared = naming.shared_tensorboard_name(BOARD_RUNS)
    assert shared not in [d.metadata.name for d in apps.list_namespaced_deployment(namespace()).items]
