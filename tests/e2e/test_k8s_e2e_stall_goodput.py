"""The stall watchdog, goodput and ``report`` of a run on the real cluster, supervised by its supervisor pod alone
(no launcher watching: the tests read ``status`` as a user's laptop would). Both tests read one real run
(``stalled``, made once per module: CI time, #33).

Worker 1 blocks forever in its input pipeline once (tests/integration/scripts/stuck_input.py, shipped as the
run's workspace layer through ``$TFCLUSTER_REGISTRY``): alive, its peers waiting in the all-reduce. The supervisor
pod finds the stall by its stacks (py-spy's, from each task's agent: no ``pods/exec``), restarts the group, the run succeeds; ``status``
shows the stall, its evidence, and where its stacks are kept: the run's ConfigMap (key ``stacks``), readable after
the supervisor's pod is gone. The same run's ``status`` carries ``goodput``, whose parts add up to the wall time
(the stall and the restart among them), kept after the run ended, and ``report``'s history has the plan and the
lead's events.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from helpers.k8s_e2e import namespace, registry, run_name, stuck_input_plan, supervise_until
from helpers.required import unavailable
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.cluster_state import STACKS_KEY
from launcher.plan import naming
from launcher.protocol.events import Step
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import JobStatus, State

pytestmark = pytest.mark.e2e


@dataclass
class Stalled:
    """The shared run once it ended: its name and the status its supervisor published last."""

    name: str
    status: JobStatus


@pytest.fixture(scope="module")
def _shared() -> Iterator[dict[str, Any]]:
    """The module's one run (made by the first test that asks): taken down with its volumes after the module."""
    made: dict[str, Any] = {}
    yield made
    if "backend" in made:
        made["backend"].cancel(made["name"], volumes=True)


@pytest.fixture
def stalled(_shared: dict[str, Any], backend: KubernetesBackend, tmp_path_factory: pytest.TempPathFactory) -> Stalled:
    """The stuck-worker run, launched and supervised to its end once per module (a second test reads the same)."""
    if "backend" not in _shared:
        pushed_to = registry()
        if not pushed_to:
            unavailable("needs TFCLUSTER_REGISTRY: a registry the cluster's nodes pull from (.ci/k8s.sh exports it)", "e2e")
        name = run_name("e2e-stall")
        # the stall timeout (60 s) is well above what a loaded CI host's pauses between steps take (20 s saw a
        # second, false stall at the run's end there), so the one stall is the stuck one
        plan = stuck_input_plan(name, tmp_path_factory.mktemp("ws"), pushed_to, stall={"timeout_seconds": 60},
                                block_after=12)
        _shared.update(backend=backend, name=name)
        backend.submit(KubernetesBackend.dry_run(plan))
        _shared["status"] = supervise_until(backend, name, lambda s: s.state.terminal)
    if "status" not in _shared:
        pytest.fail("the shared run did not end (see the first test of this module)", pytrace=False)
    return Stalled(_shared["name"], _shared["status"])


def test_the_supervisor_pod_finds_a_stuck_worker_by_its_stacks_restarts_the_group_and_keeps_the_stacks(
        stalled: Stalled, core: Any) -> None:
    name, status = stalled.name, stalled.status
    assert status.state is State.SUCCEEDED, status
    stall = status.stall
    assert stall is not None and stall.stalls == 1 and status.restarts == 1, status
    assert stall.evidence is StallEvidence.STACKS_UNCHANGED and stall.suspects == [f"{name}-worker-1"], stall
    config_map = naming.config_map_name(name)
    assert (stall.stacks_dir or "").startswith(f"ConfigMap {config_map} key {STACKS_KEY} (kubectl "), stall
    kept = core.read_namespaced_config_map(config_map, namespace()).data[STACKS_KEY]
    stuck = kept.split(f"== {name}-worker-1 (stall 1)")[1].split("\n== ")[0]
    # the stuck frame, as py-spy shows it (run by the task's agent, asked by the supervisor of its stack endpoint)
    assert re.search(r"\bgate \(/workspace/stuck_input\.py:\d+\)\n", stuck) and "script_ops.py" in stuck, kept


def test_the_same_run_has_goodput_in_status_and_a_report(stalled: Stalled, backend: KubernetesBackend) -> None:
    name, status = stalled.name, stalled.status
    assert status.state is State.SUCCEEDED, status
    goodput = status.goodput
    assert goodput is not None, status
    lost = goodput.lost_seconds
    assert goodput.wall_seconds > 0 and goodput.productive_seconds > 0 and lost.start_up > 0, goodput
    assert lost.stalls + lost.restarts > 0, goodput  # the stall and its restart cost time, and goodput says so
    parts = goodput.productive_seconds + lost.total()
    assert abs(parts - goodput.wall_seconds) <= 0.02 * goodput.wall_seconds, goodput
    now = backend.describe(name)
    assert now is not None and now.goodput == goodput  # a finished run keeps it as it ended
    history = backend.history(name)
    assert history is not None and history.plan.name == name
    assert any(isinstance(e, Step) for e in history.events[history.plan.lead().name])
    assert history.status["goodput"] == goodput.model_dump(mode="json")
