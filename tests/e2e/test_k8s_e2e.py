"""The demo on a real Kubernetes cluster (>= 1.33): required under CI (scripts/test.sh starts .ci/k8s.sh's cluster
in the background; these wait for it in a lane of their own, tests/helpers/lanes.py), elsewhere skipped unless TFCLUSTER_E2E_KUBECONFIG is set.

What only this covers: scheduling, pod DNS (``<task>.<cluster>``), the real
Job controller running each task's Job (one pod, ``backoffLimit: 0``, started by the supervisor pod),
the NetworkPolicy letting the TF ports through, a ReadWriteMany claim shared
by all tasks, real training, and TensorBoard pods
reading the runs' claims (one run, and two runs on one shared board). A worker killed with no launcher watching
(gang restart) and the supervisor pod replaced: ``test_k8s_e2e_supervisor.py``.
Every run is named with this session's suffix (``helpers.k8s_e2e.run_name``) and
taken down by the fixture that made it (conftest.py's ``launch``), whatever the test did.

Environment: TFCLUSTER_E2E_KUBECONFIG (path), TFCLUSTER_E2E_IMAGE (the
worker image, pullable by the cluster; default tfcluster-worker:latest),
TFCLUSTER_E2E_NAMESPACE (default: the kubeconfig context's, helpers.k8s_e2e), TFCLUSTER_E2E_STORAGE_CLASS
(a ReadWriteMany class, e.g. nfs-client; default: the cluster's default).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from helpers.boards import free_port, scalar_curves
from helpers.k8s_e2e import demo_plan, image, kubeconfig, namespace, run_name, supervise_until
from helpers.task_events import read_events
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

#: Two small runs shown on one TensorBoard, each read from its own claim.
BOARD_RUNS = (run_name("e2e-board-a"), run_name("e2e-board-b"))


def test_demo_trains_to_success_and_goes_away(backend: KubernetesBackend, launch: Callable[[Plan], None]) -> None:
    name = run_name("e2e-demo")
    plan = demo_plan(name)
    launch(plan)
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    events = read_events(backend.logs(name, f"{name}-chief-0"), plan.event_token)
    assert any(e.event == "finished" for e in events)
    port = free_port()  # the run's TensorBoard Deployment, through a real port-forward
    with backend.tensorboard([name], "127.0.0.1", port) as board:
        curves = scalar_curves(board.url, [f"{name}/train"], "loss", timeout=300)
        assert [int(step) for _, step, _ in curves[f"{name}/train"]][-1] == 60
    backend.cancel(name)
    supervise_gone = time.monotonic() + 120
    while backend.describe(name) is not None and time.monotonic() < supervise_gone:
        time.sleep(2)
    assert backend.describe(name) is None


def test_a_user_program_on_workers_sees_its_volume_and_who_leads(backend: KubernetesBackend,
                                                                 launch: Callable[[Plan], None]) -> None:
    name = run_name("e2e-own")
    # a real kubelet's configMap volume also holds its atomic writer's `..data` link and `..<time>` dir
    probe = ("import os; print('probe', os.environ['TFCLUSTER_IS_CHIEF'], "
             "sorted(n for n in os.listdir('/data') if not n.startswith('..')), flush=True)")
    spec = validate_data({
        "name": name,
        "image": image(),
        "command": ["python", "-c", probe],
        "roles": {"worker": {"replicas": 2}},
        "restart": {"policy": "never"},
        "success_policy": "all-workers",
        "kubernetes": {
            "namespace": namespace(),
            "volumes": [{"name": "data", "configMap": {"name": f"{name}-tfconfig", "items": [{"key": "job.json",
                                                                                             "path": "job.json"}]}}],
            "volume_mounts": [{"name": "data", "mount_path": "/data", "read_only": True}],
        },
    })
    launch(api.plan(spec, "k8s", api.new_run_id()))
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    for index, lead in ((0, "1"), (1, "0")):
        lines = [line for line in backend.logs(name, f"{name}-worker-{index}") if line.startswith("probe")]
        assert lines == [f"probe {lead} ['job.json']"], lines


def test_two_runs_side_by_side_on_one_board_read_from_their_claims(backend: KubernetesBackend,
                                                                   launch: Callable[[Plan], None]) -> None:
    for name in BOARD_RUNS:
        launch(demo_plan(name, workers=1))
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
