"""The run's supervisor pod (``kubernetes.supervisor``, the default) on the real cluster, with no launcher watching:
the test only reads ``status`` as a user's laptop would, now and then.

Its pod runs the one supervisor process under its own Role (``<name>-supervisor``) in the restricted namespace and
starts each task's suspended Job. A worker's process killed (``kill -9``: a crash) makes it restart the group (one
restart), by the spec's failure rule alone (``restart.policy: never``; the rule matches the exit code 137 and a line
of the worker's log); its pod deleted mid-run (SIGTERM: it leaves the tasks as they are and exits 143), its Job starts another,
which adopts the run from the status published in the ConfigMap, so the restart count stays 1; the run succeeds and
the supervisor's Job then completes: nothing is left running. The tasks are tiny programs (no TensorFlow: real
training with a restart is ``test_k8s_e2e_paths.py``'s preemption): the chief ends only once the test lets it (a
file it waits for in its own container, made through ``pods/exec``), so every step is ordered by an event, not by
how long a run trains.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from helpers.gates import BLOCK, wait_for
from helpers.k8s_e2e import (
    TIMEOUT_SECONDS,
    SharedClaim,
    image,
    kill_9_task,
    namespace,
    open_gate,
    run_name,
    running_pod,
    supervise_until,
    supervisor_pods,
    until,
)
from helpers.k8s_start import time_left
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan.planner import Plan
from launcher.protocol.exitcodes import ExitCode
from launcher.supervision.status import State, SupervisorState

pytestmark = pytest.mark.e2e

#: In the chief's own container: it ends (0) once this file exists.
GO = Path("/tmp/e2e-go")


#: What each worker says before it blocks: the log line ``RULE`` matches.
READY = "worker ready"
#: The one way a failed task restarts here (``restart.policy: never``): a worker killed (137) that said ``READY``.
RULE = {"exit_codes": [137], "log_pattern": READY, "roles": ["worker"], "action": "restart"}


def gated_plan(name: str, claim: str) -> Plan:
    """A chief that ends once ``GO`` exists and two workers that run until stopped; a killed worker restarts only by
    ``RULE`` (the supervisor pod holds ``restart.rules``: exit code and log pattern); no claim of its own
    (``claim``: the session's shared one)."""
    spec = validate_data({
        "name": name, "image": image(),
        "roles": {"chief": {"command": ["python", "-c", wait_for(GO)]},
                  "worker": {"replicas": 2, "command": ["python", "-c", f"print({READY!r}, flush=True); {BLOCK}"]}},
        "restart": {"policy": "never", "max_restarts": 3, "rules": [RULE]},
        "kubernetes": {"namespace": namespace(), "volume_claim": {"name": claim}},
    })
    return api.plan(spec, "k8s", api.new_run_id())


def terminated(pod: Any) -> Any:
    """The end of the pod's (one) container, None while it has not ended."""
    statuses = pod.status.container_statuses or []
    return statuses[0].state.terminated if statuses and statuses[0].state else None


def fates(core: Any, name: str) -> list[tuple[str, str | None, int | None, str | None, list[str]]]:
    """Each supervisor pod of run ``name``, oldest first: its name, phase, container's exit code and reason (once
    it ended) and its conditions that are true: what an assertion on the supervisor's Job shows when it fails."""
    return [(p.metadata.name, p.status.phase, getattr(terminated(p), "exit_code", None),
             getattr(terminated(p), "reason", None), [c.type for c in p.status.conditions or [] if c.status == "True"])
            for p in supervisor_pods(core, name)]


#: The kubelet's reason for a container whose end it did not see (kubernetes#104107: under load a pod deleted
#: gracefully can end so, exit code 137, although its process exited by itself).
KUBELET_LOST_SIGHT = "ContainerStatusUnknown"


class LastEnd:
    """The last end (exit code, reason) of pod ``name``'s container seen until the pod is gone, read every
    ``every`` seconds in a thread (the launcher's Role may not watch; a deleted pod goes about a second after its
    end): start it before the pod is deleted, ``result()`` once it is gone."""

    def __init__(self, core: Any, name: str, every: float = 0.05):
        self.seen: tuple[int, str] | None = None
        self._gone = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(core, name, every), daemon=True)
        self._thread.start()

    def _read(self, core: Any, name: str, every: float) -> None:
        while not self._gone.is_set():
            try:
                pod = core.read_namespaced_pod(name, namespace())
            except client.ApiException as exc:
                if exc.status == 404:
                    self._gone.set()
                    return
                raise
            ended = terminated(pod)
            if ended is not None:
                self.seen = (ended.exit_code, ended.reason or "")
            time.sleep(every)

    def result(self) -> tuple[int, str] | None:
        """Its last end seen; waits until the pod is gone (bounded)."""
        self._thread.join(time_left(TIMEOUT_SECONDS))  # within the test's budget (helpers.k8s_start)
        return self.seen


def log_of(core: Any, pod: str) -> str:
    return str(core.read_namespaced_pod_log(pod, namespace(), container="supervisor"))


def all_running(status: Any) -> bool:
    return len(status.tasks) == 3 and all(t.state is State.RUNNING for t in status.tasks)


def test_a_killed_worker_restarts_the_group_and_a_replaced_supervisor_pod_adopts_with_the_count_kept(
        backend: KubernetesBackend, launch: Callable[[Plan], None], core: Any, shared_claim: SharedClaim) -> None:
    name = run_name("e2e-sup")
    launch(gated_plan(name, shared_claim.name()))
    supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.ALIVE and all_running(s))
    pods = supervisor_pods(core, name)
    assert [p.status.phase for p in pods] == ["Running"], fates(core, name)  # the first one runs: none failed before
    first = pods[0]
    assert first.spec.security_context.run_as_non_root and first.spec.service_account_name == f"{name}-supervisor"

    victim = running_pod(core, f"{name}-worker-1")
    # RULE asks for READY in its log: the kill comes once it said so (its container may run before its program does)
    until(f"{victim} saying {READY!r}", lambda: READY in core.read_namespaced_pod_log(victim, namespace()))
    code, stdout, stderr = kill_9_task(core, victim)  # a crash, not a pod deletion
    # it said so before the task's end ended the container, which may end the exec too (137)
    assert stdout.split() == ["killed"] and code in (0, 137), (code, stdout, stderr)
    status = supervise_until(backend, name, lambda s: s.restarts >= 1 and s.state is State.RUNNING and all_running(s))
    assert (status.restarts, status.preemptions) == (1, 0), status

    first_end = LastEnd(core, first.metadata.name)
    core.delete_namespaced_pod(first.metadata.name, namespace())  # graceful: SIGTERM, it leaves the run as it is

    def replaced() -> Any:
        running = [p for p in supervisor_pods(core, name)
                   if p.metadata.name != first.metadata.name and p.status.phase == "Running"]
        return running[0] if running else None

    second = until("a new supervisor pod", replaced)
    until("the new supervisor adopting the run", lambda: "adopted 3 running task(s)" in log_of(core, second.metadata.name))
    job = client.BatchV1Api(core.api_client).read_namespaced_job(f"{name}-supervisor", namespace())
    # it left (143): a move its podFailurePolicy ignores, not a failure; unless the kubelet lost sight of its end
    ended = first_end.result()
    assert ended is not None and (ended[0] == int(ExitCode.PREEMPTED) or ended[1] == KUBELET_LOST_SIGHT), ended
    allowed = 0 if ended[0] == int(ExitCode.PREEMPTED) else 1
    assert (job.status.failed or 0) <= allowed, (ended, job.status, fates(core, name))
    status = backend.describe(name)
    assert status is not None and status.state is State.RUNNING, status
    assert (status.restarts, status.preemptions) == (1, 0), status  # the count survives the supervisor's pod
    open_gate(core, running_pod(core, f"{name}-chief-0"), GO)
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED, status
    assert (status.restarts, status.preemptions) == (1, 0), status
    done = supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.EXITED)
    assert done.state is State.SUCCEEDED
    log = log_of(core, second.metadata.name)
    assert "restarts used: 1, preemptions: 0" in log and f"{name}: succeeded" in log, log


@pytest.mark.parametrize(("budget", "message"), [
    ({"deadline_seconds": 20}, "failed: deadline of 20 s exceeded"),
    ({"restart": {"policy": "never", "max_preemptions": 0}}, "exited with code 143 (restart policy never)"),
], ids=["deadline_seconds", "max_preemptions"])
def test_the_supervisor_pod_ends_a_run_past_its_budget(backend: KubernetesBackend, launch: Callable[[Plan], None],
                                                       core: Any, shared_claim: SharedClaim, budget: dict[str, Any],
                                                       message: str) -> None:
    """The supervisor pod alone holds the run to its ``deadline_seconds`` (tasks that never end are stopped and the
    run fails) and to ``max_preemptions`` (a worker's pod deleted, past a budget of 0, is a failure: no restart)."""
    name = run_name(f"e2e-budget-{'deadline' if 'deadline_seconds' in budget else 'preempt'}")  # one name per case:
    # the case before may still be taking its Jobs down (``cancel`` deletes them and does not wait)
    spec = validate_data({
        "name": name, "image": image(),
        "roles": {"chief": {"command": ["python", "-c", BLOCK]}, "worker": {"replicas": 1, "command": ["python", "-c", BLOCK]}},
        "kubernetes": {"namespace": namespace(), "volume_claim": {"name": shared_claim.name()}}, **budget,
    })
    launch(api.plan(spec, "k8s", api.new_run_id()))
    if "restart" in budget:
        supervise_until(backend, name, lambda s: len(s.tasks) == 2 and all(t.state is State.RUNNING for t in s.tasks))
        core.delete_namespaced_pod(running_pod(core, f"{name}-worker-0"), namespace())  # graceful: a preemption
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.FAILED and message in status.message, status
    assert (status.restarts, status.preemptions) == (0, 0), status
