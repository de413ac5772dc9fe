"""All-or-nothing placement (``kubernetes.gang``) on the real cluster: Kubernetes' own gang scheduling
(``scheduling.k8s.io/v1beta1`` PodGroup, gate ``GenericWorkload``, which .ci/k8s.sh turns on).

Two runs that each need 3 task pods where only 4 fit (sized from the node's allocatable memory minus what is already
requested, by the cluster administrator's reading: the launcher's Role reads no node): the one that waits holds no
pod bound while the other runs, and both succeed, one after the other. A watcher lists the runs' pods every
``SAMPLE_SECONDS`` and records each run's active task pods, of them bound to the node, and of them found no room by
the scheduler. The waiting run is checked from the moment the other runs whole until that one is let go: it is
held there (its chief waits for a gate) until the watcher saw all its pods created and the scheduler's verdict on
them, so the check cannot pass by sampling too early; without the gang the scheduler binds what fits of it (the
half-placement that deadlocks two runs). The moment a waiting gang is bound is not sampled as half-placed: the
scheduler binds its pods one API write apiece, and a pod not bound yet still carries its earlier verdict. And a
restart: the evaluator, which restarts alone, killed while the chief and worker run, gets a
replacement pod that the scheduler places (the group's other pods count toward its ``minCount``). That needs a new
pod: its agent is killed (``kill_9_agent``), which ends the container (the agent is tini's one child), so its Job is
replaced; killing only its program (``kill_9_task``) would restart it in place, in the same pod, which its held
agent keeps (``test_k8s_e2e_paths.py`` walks that path). The tasks are tiny
programs ordered by gates (``helpers.gates``: the chief ends once the test creates ``GO`` in its container), never by
time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.gates import BLOCK, wait_for
from helpers.k8s_e2e import SharedClaim, admin_kubeconfig, image, kill_9_agent, namespace, open_gate, run_name, running_pod, supervise_until, until
from helpers.required import unavailable
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.kubeapi import Kind
from launcher.backends.kubernetes.status import CONTROLLER_UID
from launcher.backends.kubernetes.supervisor_objects import RESOURCES
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.supervision.status import State

pytestmark = pytest.mark.e2e

#: In the chief's own container: it ends (0) once this file exists.
GO = Path("/tmp/e2e-go")
#: How often the watcher lists the runs' pods.
SAMPLE_SECONDS = 0.5
#: Task pods per run, and how many of them fit the node at once.
TASKS, FITTING = 3, 4


def _admin_core() -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=admin_kubeconfig()))


def free_memory() -> int:
    """Bytes of the allocatable memory of the one node that takes the runs' pods (untainted: a simulated node
    carries a taint) that no pod of any namespace requests yet."""
    from kubernetes.utils import parse_quantity

    core = _admin_core()
    nodes = [n for n in core.list_node().items if not n.spec.taints]
    if len(nodes) != 1:
        unavailable(f"sizes its runs to fill one node; the cluster has {len(nodes)} untainted", "e2e")
    node = nodes[0]
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node.metadata.name}").items
    requested = sum(int(parse_quantity((c.resources.requests or {}).get("memory", "0")))
                    for pod in pods if pod.status.phase not in ("Succeeded", "Failed")
                    for c in pod.spec.containers if c.resources)
    return int(parse_quantity(node.status.allocatable["memory"])) - requested


def task_memory(runs: int) -> str:
    """Memory for each task pod such that ``FITTING`` fit beside ``runs`` supervisor pods and one more does not."""
    from kubernetes.utils import parse_quantity

    room = free_memory() - runs * int(parse_quantity(RESOURCES["requests"]["memory"]))
    return f"{int(room / (FITTING + 0.5)) >> 20}Mi"


def gated_plan(name: str, claim: str, memory: str, evaluator: bool = False) -> Plan:
    """A chief that ends once ``GO`` exists and workers (and an evaluator) that run until stopped, ``TASKS`` pods in
    all, each requesting ``memory``; a killed task is restarted; the session's shared claim."""
    roles: dict[str, Any] = {"chief": {"command": ["python", "-c", wait_for(GO)], "resources": {"memory": memory}},
                             "worker": {"replicas": TASKS - 1 - evaluator, "command": ["python", "-c", BLOCK],
                                        "resources": {"memory": memory}}}
    if evaluator:
        roles["evaluator"] = {"command": ["python", "-c", BLOCK], "resources": {"memory": memory}}
    spec = validate_data({
        "name": name, "image": image(), "roles": roles,
        "restart": {"policy": "exit-code", "max_restarts": 3},
        "kubernetes": {"namespace": namespace(), "volume_claim": {"name": claim}},  # gang: auto, served here
    })
    return api.plan(spec, "k8s", api.new_run_id())


class Placements:
    """Each run's (active task pods, of them bound to a node, of them the scheduler found no room for), sampled
    every ``SAMPLE_SECONDS`` until ``stop``."""

    def __init__(self, core: Any, names: list[str]) -> None:
        self.samples: dict[str, list[tuple[int, int, int]]] = {name: [] for name in names}
        #: The LISTs that failed (the sampler goes on): said in the test's failure.
        self.errors: list[str] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(core,), daemon=True)
        self._thread.start()

    def _watch(self, core: Any) -> None:
        while not self._stopped.wait(SAMPLE_SECONDS):
            try:
                pods = core.list_namespaced_pod(namespace(), label_selector=naming.LABEL_ROLE,
                                                _request_timeout=SAMPLE_SECONDS * 20).items
            except Exception as error:  # noqa: BLE001  (kept for the test's end: a sampler never stops on one)
                self.errors.append(repr(error))
                continue
            for name, samples in self.samples.items():
                active = [p for p in pods if p.metadata.labels.get(naming.LABEL_CLUSTER) == name
                          and p.metadata.deletion_timestamp is None and p.status.phase in ("Pending", "Running")]
                samples.append((len(active), sum(1 for p in active if p.spec.node_name),
                                sum(1 for p in active if _unschedulable(p))))

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(30)

    def mark(self, name: str) -> int:
        """The index the next sample of ``name`` will have."""
        return len(self.samples[name])

    def waited_whole(self, name: str, since: int) -> bool:
        """Whether a sample of ``name`` from ``since`` on shows all its task pods, none bound, and the scheduler's
        verdict that it found no room for them."""
        return any(sample[0] == TASKS and sample[1] == 0 and sample[2] > 0 for sample in self.samples[name][since:])

    def placed_whole(self, name: str) -> bool:
        return any(sample[:2] == (TASKS, TASKS) for sample in self.samples[name])


def _unschedulable(pod: Any) -> bool:
    """The scheduler's verdict on a pod it could not place: ``PodScheduled`` False, ``Unschedulable``."""
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
               for c in pod.status.conditions or [])


def test_two_runs_where_only_one_fits_are_never_half_placed_and_both_succeed_one_after_the_other(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core: Any, shared_claim: SharedClaim
) -> None:
    names = [run_name("eg-gang-a"), run_name("eg-gang-b")]
    memory = task_memory(runs=2)
    watcher = Placements(core, names)
    try:
        for name in names:
            launch(gated_plan(name, shared_claim.name(), memory))
            group = backend.api.read(Kind.POD_GROUP, naming.pod_group_name(name), namespace())
            assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": TASKS}}

        def one_runs_whole() -> str | None:
            return next((n for n in names if watcher.placed_whole(n) and all(
                t.state is State.RUNNING for t in backend.describe(n).tasks)), None)

        first = until("one run with all its task pods running", one_runs_whole)
        second = next(n for n in names if n != first)
        waiting = watcher.mark(second)

        def second_waits_whole() -> bool:
            held = watcher.samples[second][waiting:]
            assert all(bound == 0 for _, bound, _ in held), (second, held)  # none of a waiting gang is bound
            return watcher.waited_whole(second, waiting)

        # the first is held until the second's pods all exist and the scheduler found no room for them
        until(f"{second}'s pods all waiting", second_waits_whole)
        for name in (first, second):
            # its pods all bound and not yet ended, seen by the sampler, before its chief is let go (its workers end
            # with it): a run whose pods were never placed whole waits here until the test's budget fails it
            until(f"{name} sampled with all its task pods bound", lambda name=name: watcher.placed_whole(name) or None)
            open_gate(core, running_pod(core, f"{name}-chief-0"), GO)
            status = supervise_until(backend, name, lambda s: s.state.terminal)
            assert status.state is State.SUCCEEDED and status.restarts == 0, status
    finally:
        watcher.stop()
        if watcher.errors:  # shown with a failure: a sampler that saw nothing says why
            print(f"{len(watcher.errors)} LISTs of the sampler failed, the last: {watcher.errors[-1]}")
    assert all(watcher.placed_whole(name) for name in names)


def test_a_task_restarted_alone_while_the_others_of_its_gang_run_is_placed(
    backend: KubernetesBackend, launch: Callable[[Plan], None], core: Any, shared_claim: SharedClaim
) -> None:
    name = run_name("eg-gang-restart")
    launch(gated_plan(name, shared_claim.name(), "128Mi", evaluator=True))
    evaluator = running_pod(core, f"{name}-evaluator-0")
    chief = running_pod(core, f"{name}-chief-0")
    job_of = core.read_namespaced_pod(evaluator, namespace()).metadata.labels[CONTROLLER_UID]
    # the evaluator restarts alone, in a new pod of a new Job (its agent killed: no restart in place), which joins
    # a running gang
    code, out, err = kill_9_agent(core, evaluator)
    # it said so before the agent's end ended the container, which may end the exec too (137)
    assert out.split() == ["killed"] and code in (0, 137), (code, out, err)
    replacement = until("the evaluator's replacement pod running", lambda: (
        (pod := running_pod(core, f"{name}-evaluator-0")) != evaluator and pod))
    assert core.read_namespaced_pod(replacement, namespace()).metadata.labels[CONTROLLER_UID] != job_of
    assert running_pod(core, f"{name}-chief-0") == chief  # the rest of the gang ran on, in its pods
    open_gate(core, chief, GO)
    status = supervise_until(backend, name, lambda s: s.state.terminal)
    assert status.state is State.SUCCEEDED and status.restarts == 1, status
