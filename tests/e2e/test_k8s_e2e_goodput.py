"""Goodput and ``report`` of a run on the real cluster, supervised by its supervisor pod alone (no launcher watching).

The supervisor pod runs the code in the image (``TFCLUSTER_E2E_IMAGE``): its rounds feed the run's ledger in its
ConfigMap; ``status`` then carries ``goodput`` whose parts add up to the wall time, kept after the run ended, and
``report``'s history has the plan and the lead's events.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from helpers.k8s_e2e import demo_plan, run_name, supervise_until
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan.planner import Plan
from launcher.protocol.events import Step
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e


def test_a_short_run_has_goodput_in_status_and_a_report(backend: KubernetesBackend,
                                                         launch: Callable[[Plan], None]) -> None:
    name = run_name("e2e-gp")
    launch(demo_plan(name, workers=1, epochs=2))
    status = supervise_until(backend, name, lambda s: s.state.terminal, watch=False)
    assert status.state is State.SUCCEEDED, status
    goodput = status.goodput
    assert goodput is not None, status
    assert goodput.wall_seconds > 0 and goodput.productive_seconds > 0 and goodput.lost_seconds.start_up > 0
    parts = goodput.productive_seconds + goodput.lost_seconds.total()
    assert abs(parts - goodput.wall_seconds) <= 0.02 * goodput.wall_seconds, goodput
    assert backend.describe(name).goodput == goodput  # a finished run keeps it as it ended
    history = backend.history(name)
    assert history is not None and history.plan.name == name
    assert any(isinstance(e, Step) for e in history.events[history.plan.lead().name])
    assert history.status["goodput"] == goodput.model_dump(mode="json")
