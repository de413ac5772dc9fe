"""The run's in-cluster supervisor (``kubernetes.supervisor``, the default) on the real cluster, with no launcher
watching: nothing here calls ``watch_round``; the test only reads ``status`` as a user's laptop would, now and then.

Its pod runs the harness's round supervisor under its own Role (``<name>-supervisor``) in the restricted namespace;
deleted mid-run (SIGTERM: it leaves the run as it is, ``test_k8s_in_cluster_supervisor.py``), its Job starts
another, which adopts the run from the API (the restart counts stay true); a
worker's process killed (``kill -9``: a crash) is restarted by the Job controller with the supervisor's gang
rules, the run succeeds, and the supervisor's Job then completes: nothing is left running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from helpers.k8s_e2e import TIMEOUT_SECONDS, demo_plan, kill_9_task, namespace, run_name, supervise_until
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.supervision.status import State, SupervisorState

pytestmark = pytest.mark.e2e


def supervisor_pods(core: Any, name: str) -> list[Any]:
    selector = f"{naming.LABEL_SUPERVISOR}={name}"
    return sorted(core.list_namespaced_pod(namespace(), label_selector=selector).items,
                  key=lambda p: p.metadata.creation_timestamp)


def until(what: str, found: Callable[[], Any], timeout: float = TIMEOUT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what}")


def log_of(core: Any, pod: str) -> str:
    return str(core.read_namespaced_pod_log(pod, namespace(), container="supervisor"))


def test_with_no_launcher_watching_the_supervisor_pod_is_replaced_adopts_and_the_run_succeeds(
        backend: KubernetesBackend, launch: Callable[[Plan], None], core: Any) -> None:
    name = run_name("e2e-sup")
    launch(demo_plan(name, epochs=100))  # long enough for a supervisor's replacement to start while it trains
    status = supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.ALIVE
                             and (s.progress.step or 0) >= 5, watch=False)
    assert status.state is State.RUNNING, status
    (first,) = [p for p in supervisor_pods(core, name) if p.status.phase == "Running"]
    assert first.spec.security_context.run_as_non_root and first.spec.service_account_name == f"{name}-supervisor"
    core.delete_namespaced_pod(first.metadata.name, namespace())  # graceful: SIGTERM, it leaves the run as it is

    def replaced() -> Any:
        running = [p for p in supervisor_pods(core, name)
                   if p.metadata.name != first.metadata.name and p.status.phase == "Running"]
        return running[0] if running else None

    second = until("a new supervisor pod", replaced)
    assert supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.ALIVE, watch=False)
    pods = core.list_namespaced_pod(namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}").items
    victim = next(p.metadata.name for p in pods
                  if p.metadata.name.startswith(f"{name}-worker-1-") and p.status.phase == "Running")
    code, stdout, stderr = kill_9_task(core, victim)
    assert (code, stdout.split()) == (0, ["killed"]), (code, stdout, stderr)
    status = supervise_until(backend, name, lambda s: s.state.terminal, watch=False)
    assert status.state is State.SUCCEEDED, status
    assert status.restarts >= 1 and status.preemptions == 0, status  # counted once, by whoever supervised
    done = supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.EXITED, watch=False)
    assert done.state is State.SUCCEEDED
    log = log_of(core, second.metadata.name)
    assert "supervising in rounds" in log and "the run is over; nothing left to supervise" in log, log
