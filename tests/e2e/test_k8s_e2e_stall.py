"""The stall watchdog of the run's in-cluster supervisor on the real cluster, with no launcher watching (nothing here
calls ``watch_round``; the test reads ``status`` as a user's laptop would).

Worker 1 blocks forever in its input pipeline once (tests/integration/scripts/stuck_input.py, shipped as the
run's workspace layer through ``$TFCLUSTER_REGISTRY``): alive, its peers waiting in the all-reduce. The supervisor
pod finds the stall by its stacks (read through ``pods/exec``), restarts the group, the run succeeds; ``status``
shows the stall, its evidence, and where its stacks are kept: the run's ConfigMap, readable after the supervisor's
pod is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.k8s_e2e import demo_plan, namespace, registry, run_name, supervise_until
from helpers.required import unavailable
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes import in_cluster
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

STUCK_INPUT = Path(__file__).parents[1] / "integration" / "scripts" / "stuck_input.py"


def stuck_plan(name: str, workspace: Path, pushed_to: str) -> Plan:
    """The demo run (a chief, two workers) whose worker 1 blocks in its input pipeline after 12 batches, once (the
    marker on the run's claim); the smallest stall floor, a short run."""
    demo = demo_plan(name).spec.model_dump(mode="json", exclude_none=True)
    spec = validate_data({
        **{key: demo[key] for key in ("name", "image", "roles", "checkpoint", "restart", "deadline_seconds")},
        "workspace": str(workspace),
        "training": {"module": "stuck_input", "epochs": 2, "steps_per_epoch": 20, "batch_size_per_replica": 16,
                     "args": {"train_examples": 512, "test_examples": 128, "marker": f"{CONTAINER_CHECKPOINT_DIR}/blocked",
                              "block_after": 12}},
        "stall": {"timeout_seconds": 20},
        "kubernetes": {**demo["kubernetes"], "registry": pushed_to},
    })
    return api.plan(spec, "k8s", api.new_run_id())


def test_the_supervisor_pod_finds_a_stuck_worker_by_its_stacks_restarts_the_group_and_keeps_the_stacks(
        backend: KubernetesBackend, launch: Callable[[Plan], None], core: Any, tmp_path: Path) -> None:
    pushed_to = registry()
    if not pushed_to:
        unavailable("needs TFCLUSTER_REGISTRY: a registry the cluster's nodes pull from (.ci/k8s.sh exports it)", "e2e")
    name = run_name("e2e-stall")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "stuck_input.py").write_text(STUCK_INPUT.read_text())
    plan = stuck_plan(name, workspace, pushed_to)
    launch(plan)
    status = supervise_until(backend, name, lambda s: s.state.terminal, watch=False)
    assert status.state is State.SUCCEEDED, status
    stall = status.stall
    assert stall is not None and stall.stalls == 1 and status.restarts >= 1, status
    assert stall.evidence is StallEvidence.STACKS_UNCHANGED and stall.suspects == [f"{name}-worker-1"], stall
    config_map = naming.config_map_name(name)
    assert (stall.stacks_dir or "").startswith(f"ConfigMap {config_map} key {in_cluster.STACKS_KEY} (kubectl "), stall
    kept = core.read_namespaced_config_map(config_map, namespace()).data[in_cluster.STACKS_KEY]
    stuck = kept.split(f"== {name}-worker-1 (stall 1)")[1].split("\n== ")[0]
    assert "gate (/workspace/stuck_input.py" in stuck and "script_ops.py" in stuck, kept
