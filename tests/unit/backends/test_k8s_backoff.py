"""A supervisor whose API server is down or throttles (issue 48's bad input): while the run's objects cannot be
watched its poll rounds back off (``launcher.supervision.backoff``; before, a round every ``poll_seconds`` for as
long as the API was down: a fifth of a core, and a status write tried at each), and at the first answer they are
back at their pace.

As in test_k8s_watched.py, the supervisor's time is the fake's clock (its ``pause`` moves it) and the watches are
threads, waited for on a condition (bounded), never for a wall-clock time.
"""

from __future__ import annotations

import pytest

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, caught_up
from helpers.k8s_specs import dry_run_for
from helpers.polling import wait_for_condition
from launcher.backends.kubernetes import apply, watched
from launcher.backends.kubernetes.cluster_state import ConfigMapStore
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.supervision.status import State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

SPEC = {"name": "bo", "roles": {"chief": {}, "worker": {"replicas": 3}}, "kubernetes": {"supervisor": False}}
#: How long the API server is out (the fake's clock): less than ``watched.STALE_SECONDS``, a restart ridden out.
OUTAGE_SECONDS = 60.0
POLL_SECONDS = 0.5
#: Rounds in the outage at most: a pause that doubles from ``POLL_SECONDS`` (jittered: half of it at least) to
#: its cap of 30 s (15 at least) takes 9 rounds to pass a minute; at the poll's pace it was 120.
OUTAGE_ROUNDS = 12


@pytest.mark.parametrize("outage", ["unavailable", "throttled"])
def test_rounds_back_off_while_the_api_server_is_out_and_keep_their_pace_once_it_answers(
        fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch, outage: str) -> None:
    """``unavailable``: every request 503 (a restarting API server); ``throttled``: every request 429 with
    ``Retry-After: 0`` (urllib3 waits that out three times by itself, then the request fails). The run's status is
    written to its ConfigMap as the supervisor pod does (``ConfigMapStore``)."""
    monkeypatch.setattr(watched, "RETRY_SECONDS", 0.01)  # the watches' own backoff, in real time: kept short
    fake.retry_after = "0"
    fake.job_controller = True
    dry_run = dry_run_for(SPEC)
    api = backend_for(fake).api
    apply.submit(api, dry_run, "default")
    plan = dry_run.plan
    runtime = KubernetesRuntime(api, plan, "default", clock=lambda: fake.now,
                                pause=lambda seconds: setattr(fake, "now", fake.now + seconds))
    pauses: dict[str, list[float]] = {"before": [], "out": [], "after": []}
    phase, out_at = "before", 0.0
    supervisor: Supervisor

    def pause(seconds: float) -> None:
        nonlocal phase, out_at
        pauses[phase].append(seconds)
        fake.now += seconds
        if phase == "before" and len(pauses["before"]) == 10:
            caught_up(fake, runtime.objects)
            setattr(fake, outage, True)
            fake.restart()  # cuts the watches
            wait_for_condition(lambda: runtime.objects.snapshot() is None)
            phase, out_at = "out", fake.now
        elif phase == "out" and fake.now - out_at >= OUTAGE_SECONDS:
            setattr(fake, outage, False)
            caught_up(fake, runtime.objects)
            phase = "after"
        elif phase == "after" and len(pauses["after"]) == 20:
            supervisor.cancel()

    state = ConfigMapStore(api, plan.name, "default", in_pod=True)
    supervisor = Supervisor(plan, runtime, on_status=state.write_status,
                            tuning=Tuning(poll_seconds=POLL_SECONDS, linger_seconds=0.0, pause=pause,
                                          clock=lambda: fake.now))
    try:
        status = supervisor.run()
    finally:
        runtime.close()
    assert status.state is State.CANCELLED, status.message  # no fault, no task taken as lost meanwhile
    assert len(pauses["after"]) == 20
    assert len(pauses["out"]) <= OUTAGE_ROUNDS, f"{len(pauses['out'])} rounds in {OUTAGE_SECONDS:.0f} s out"
    assert max(pauses["out"]) <= 30.0
    assert pauses["after"] == [POLL_SECONDS] * 20  # the pace is back at the first answer
