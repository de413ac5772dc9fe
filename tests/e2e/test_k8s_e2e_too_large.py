"""A run larger than the cluster can ever hold, on the test cluster's simulated nodes (KWOK; CI's start makes 20 of
32 CPUs each): ``TASKS`` tasks of ``CPUS`` CPUs each, so each task fits a node alone but no two share one, and the
run needs one node more than there are. With the gang (``kubernetes.gang: auto``: the cluster serves PodGroups) no
task pod is ever bound, so the run holds none of the cluster's room; its supervisor pod runs on the real node and
keeps publishing, and ``status`` says the truth: the run is pending, its tasks cannot be placed, in the scheduler's
words. ``down --volumes`` then leaves nothing of it.

What it does not show: tfcluster gives no verdict of its own that the run can never fit (the launcher's Role cannot
read the nodes; the scheduler's words are what it has).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import k8s_sim
from helpers.k8s_e2e import cli, left_of, run_name, supervise_until, supervisor_pods, until
from helpers.required import unavailable
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.supervision.status import State, SupervisorState

pytestmark = pytest.mark.e2e

#: More than half a simulated node's 32 CPUs: one task a node.
CPUS = 17


def test_a_run_larger_than_the_cluster_binds_no_pod_and_status_says_it_cannot_be_placed(
        backend: KubernetesBackend, taken_down: list[str], tmp_path: Path) -> None:
    admin = k8s_sim.admin()
    nodes = k8s_sim.sim_nodes(admin)
    if not nodes:
        unavailable("the test cluster has no simulated nodes: TFCLUSTER_K8S_SIM_NODES=20 bash .ci/k8s.sh", "e2e")
    tasks = nodes + 1
    name = run_name("e2e-too-large")
    spec = k8s_sim.sim_spec(name, tasks)
    for role in spec["roles"].values():
        role["resources"] = {**k8s_sim.RESOURCES, "cpu": CPUS}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    taken_down.append(name)
    up = cli("up", "-b", "k8s", "-d", "spec.yaml", cwd=tmp_path)
    assert up.returncode == 0, up.stderr

    # every task pod exists and the scheduler has said of each why it is not placed
    until(f"all {tasks} task pods made and found unschedulable", lambda: len(pods := k8s_sim.task_pods(admin, name)) == tasks
          and all(_unschedulable(p) for p in pods))
    status = supervise_until(backend, name, lambda s: s.state == State.PENDING
                             and all(t.message.startswith("pending: Unschedulable: ") for t in s.tasks))
    assert status.supervisor is SupervisorState.ALIVE, status
    assert status.message.startswith(f"pending: {name}-") and " cannot be placed: Unschedulable: " in status.message, status
    assert any("Insufficient cpu" in t.message for t in status.tasks), status.tasks
    assert (status.restarts, status.preemptions) == (0, 0), status
    # none of them holds room: the gang binds none (read after the supervisor published, so after the scheduler tried)
    assert [p.metadata.name for p in k8s_sim.task_pods(admin, name) if p.spec.node_name] == []
    [supervisor] = supervisor_pods(admin, name)
    assert supervisor.status.phase == "Running"

    down = cli("down", name, "--volumes", cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    until("nothing of the run left", lambda: not left_of(name, admin) and not supervisor_pods(admin, name), every=2)

def _unschedulable(pod: Any) -> bool:
    """The scheduler's ``PodScheduled`` False, ``Unschedulable``, on ``pod``."""
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
               for c in pod.status.conditions or [])
