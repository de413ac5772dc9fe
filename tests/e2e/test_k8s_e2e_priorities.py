"""Priorities, preemption and every wait's reason on a real Kubernetes cluster (issue 46): required under CI.

A low-priority run filling the node is preempted by a high-priority one: a preemption (never a restart, under
``max_restarts: 0``), it waits whole until the high run ended, resumes from its backup and succeeds. A run no node
can ever hold is ``pending`` in ``status`` with the scheduler's reason, and ``down`` removes it. A PriorityClass
that does not exist is one line from ``up``, nothing left. The classes ``tfcluster-e2e-low`` and ``-high`` are
.ci/k8s.sh's (a cluster admin makes PriorityClasses, never the launcher). The runs size themselves from the node's
allocatable memory less what its pods request (read as the cluster's admin), never a hard-coded amount. Same
environment, image, helpers and fixtures as ``test_k8s_e2e.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.k8s_e2e import (
    admin_kubeconfig,
    cli,
    demo_plan,
    kubeconfig,
    left_of,
    run_name,
    supervise_until,
    until,
)
from helpers.task_events import read_events
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.supervisor_objects import RESOURCES
from launcher.plan.planner import Plan
from launcher.protocol.events import EventKind
from launcher.spec.quantities import byte_count
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

LOW, HIGH = "tfcluster-e2e-low", "tfcluster-e2e-high"
MI = 2**20
#: Room left free beside the low run (its supervisor's and the high run's supervisor's pods fit in it).
SLACK = 64 * MI


def free_memory() -> int:
    """Bytes of memory the node's allocatable leaves beside what its running pods request (the cluster's admin reads
    the node and every namespace's pods); the test cluster has one node the runs' pods may go to (simulated nodes
    beside it are tainted)."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=admin_kubeconfig()))
    [node] = [n for n in core.list_node().items
              if not any(t.effect in ("NoSchedule", "NoExecute") for t in n.spec.taints or [])]
    requested = sum(byte_count(str((c.resources.requests or {}).get("memory", "0")))
                    for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node.metadata.name}").items
                    if pod.status.phase not in ("Succeeded", "Failed") for c in pod.spec.containers)
    return byte_count(node.status.allocatable["memory"]) - requested


def prioritized(name: str, priority: str, memory: int, epochs: int, **changes: Any) -> Plan:
    """``demo_plan(name)`` (a chief and a worker) at ``priority``, each task requesting ``memory`` bytes."""
    data = demo_plan(name, workers=1, epochs=epochs).spec.model_dump(mode="json", exclude_unset=True)
    data["kubernetes"] = {**data["kubernetes"], "priority_class": priority}
    data["roles"] = {role: {**spec, "resources": {"memory": f"{memory // MI}Mi"}} for role, spec in data["roles"].items()}
    return api.plan(validate_data({**data, **changes}), "k8s", api.new_run_id())


def test_a_low_run_preempted_by_a_high_one_waits_resumes_from_its_backup_and_succeeds_without_a_restart(
    backend: KubernetesBackend, launch: Callable[[Plan], None]
) -> None:
    supervisor = byte_count(RESOURCES["requests"]["memory"])
    # each run's two tasks fill what the node has beside both supervisors: the high one fits only by preempting
    memory = (free_memory() - 2 * supervisor - SLACK) // 2
    low = run_name("pr-low")
    # 600 steps: the high run's supervisor starts and the scheduler preempts while the low one still trains (it was
    # at step ~55 of 1,200 when preempted, at 0.2 s a step under load, the whole test 10.5 min)
    low_plan = prioritized(low, LOW, memory, epochs=20, restart={"policy": "exit-code", "max_restarts": 0})
    launch(low_plan)
    supervise_until(backend, low, lambda s: (s.progress.step or 0) >= 10)  # backed up (every 5 steps)
    high = run_name("pr-high")
    launch(prioritized(high, HIGH, memory, epochs=1))

    waiting = supervise_until(backend, low, lambda s: s.preemptions >= 1 and s.state is State.PENDING)
    assert "cannot be placed" in waiting.message, waiting  # the whole group waits, with the scheduler's reason
    assert supervise_until(backend, high, lambda s: s.state.terminal).state is State.SUCCEEDED
    status = supervise_until(backend, low, lambda s: s.state.terminal)

    assert status.state is State.SUCCEEDED, status
    assert status.preemptions >= 1 and status.restarts == 0, status
    resumed = read_events(backend.logs(low, f"{low}-chief-0"), low_plan.event_token)  # its last run's
    restored = [e for e in resumed if e.event is EventKind.RESTORED]
    assert restored and max(e.step for e in restored) >= 5, resumed  # from its backup, not from the start
    assert any(e.event is EventKind.FINISHED for e in resumed)


def test_a_run_no_node_can_hold_is_pending_with_the_schedulers_reason_and_down_removes_it(
    backend: KubernetesBackend, tmp_path: Path, taken_down: list[str]
) -> None:
    name = run_name("pr-never")
    too_big = free_memory() * 4 // MI
    spec = {**_spec(name), "roles": {"worker": {"resources": {"memory": f"{too_big}Mi"}}}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    taken_down.append(name)
    up = cli("up", "spec.yaml", "-b", "k8s", "--detach", cwd=tmp_path)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    shown = supervise_until(backend, name, lambda s: s.state is State.PENDING and "cannot be placed" in s.message,
                            timeout=180)  # its supervisor pod placed, pulled and started first, beside the other lane
    assert "Insufficient memory" in shown.message, shown
    status = cli("status", name, "-o", "json", cwd=tmp_path)
    assert '"state": "pending"' in status.stdout and "Insufficient memory" in status.stdout, status.stdout
    down = cli("down", name, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    until("the run's objects gone", lambda: left_of(name, _core()) in ([], [f"persistent_volume_claim/{name}-checkpoints"]))


def test_a_priority_class_that_does_not_exist_is_one_line_from_up_and_nothing_is_left(tmp_path: Path) -> None:
    name = run_name("pr-unknown")
    spec = _spec(name)
    spec["kubernetes"]["priority_class"] = "tfcluster-e2e-no-such-class"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    up = cli("up", "spec.yaml", "-b", "k8s", "--detach", cwd=tmp_path)
    assert up.returncode != 0, up.stdout
    [line] = [line for line in up.stderr.splitlines() if line.strip()]
    assert "no PriorityClass with name tfcluster-e2e-no-such-class was found" in line, up.stderr
    until("nothing of the run left", lambda: not left_of(name, _core()))


def _spec(name: str) -> dict[str, Any]:
    """A small spec of the e2e image in the e2e namespace (the claim: its own, as ``demo_plan``'s)."""
    data = demo_plan(name).spec.model_dump(mode="json", exclude_unset=True)
    return {**data, "roles": {"worker": {}}}


def _core() -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig()))
