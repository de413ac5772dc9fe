"""A few hundred tasks on the test cluster's simulated nodes (KWOK, ``TFCLUSTER_K8S_SIM_NODES``; CI's start makes 20):
the real API server, scheduler, Job controller and the run's real supervisor pod, with pods that run nothing.

A MultiWorkerMirrored run of ``TASKS`` tasks (``helpers.k8s_sim.sim_spec``) launched with ``up -d``: every task pod
reaches Running on a simulated node while the supervisor pod runs on the real one (its own placement: it takes
neither the tasks' node selector nor their toleration); ``status`` says so, task by task. One worker's pod deleted
(its simulated program ends as on SIGTERM, 143: .ci/k8s/kwok/stages) is acted on: ``status`` counts one preemption of
the gang, whose every task is Running again after it. ``down --volumes`` then leaves nothing of the run: tasks, supervisor, their objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import k8s_sim
from helpers.k8s_e2e import cli, left_of, namespace, run_name, supervise_until, supervisor_pods, until
from helpers.required import unavailable
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

#: A few hundred: the scale the supervisor, the API server and the scheduler meet, in a few minutes on CI's host.
TASKS = 200


def all_running(core: Any, name: str) -> bool:
    """Every task has exactly one pod, and it runs."""
    phases = k8s_sim.phases(core, name)
    return phases["Running"] == TASKS and sum(phases.values()) == TASKS


def test_hundreds_of_simulated_tasks_run_are_supervised_and_leave_nothing(
        backend: KubernetesBackend, taken_down: list[str], tmp_path: Path) -> None:
    admin = k8s_sim.admin()
    if not k8s_sim.sim_nodes(admin):
        unavailable("the test cluster has no simulated nodes: TFCLUSTER_K8S_SIM_NODES=20 bash .ci/k8s.sh", "e2e")
    name = run_name("e2e-scale")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(k8s_sim.sim_spec(name, TASKS)))
    taken_down.append(name)
    up = cli("up", "-b", "k8s", "-d", "spec.yaml", cwd=tmp_path)
    assert up.returncode == 0, up.stderr

    until(f"all {TASKS} task pods Running", lambda: all_running(admin, name), every=5)
    simulated = {n.metadata.name for n in admin.list_node(label_selector="type=kwok").items}
    assert {p.spec.node_name for p in k8s_sim.task_pods(admin, name)} <= simulated
    [supervisor] = until("the supervisor pod Running", lambda: [
        p for p in supervisor_pods(admin, name) if p.status.phase == "Running"])
    assert supervisor.spec.node_name not in simulated
    status = supervise_until(backend, name, lambda s: s.state == State.RUNNING
                             and sum(t.state == State.RUNNING for t in s.tasks) == TASKS)
    assert len(status.tasks) == TASKS and status.restarts == 0 and status.preemptions == 0

    victim = sorted(p.metadata.name for p in k8s_sim.task_pods(admin, name) if "-worker-" in p.metadata.name)[-1]
    admin.delete_namespaced_pod(victim, namespace())
    status = supervise_until(backend, name, lambda s: s.restarts + s.preemptions >= 1)
    assert (status.restarts, status.preemptions) == (0, 1), status
    until(f"all {TASKS} task pods Running again", lambda: all_running(admin, name), every=5)
    status = supervise_until(backend, name, lambda s: s.state == State.RUNNING
                             and sum(t.state == State.RUNNING for t in s.tasks) == TASKS)
    assert (status.restarts, status.preemptions) == (0, 1)

    down = cli("down", name, "--volumes", cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    until("nothing of the run left", lambda: not left_of(name, admin) and not supervisor_pods(admin, name), every=5)
