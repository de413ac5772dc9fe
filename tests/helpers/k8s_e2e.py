"""What the tests on a real Kubernetes cluster share (tests/e2e/, tests/contract/'s real side).

Contract: the cluster is the kubeconfig at ``TFCLUSTER_E2E_KUBECONFIG`` (``helpers.k8s_start`` sets it for a started
cluster); ``namespace()`` is the one home of the namespace the tests use: ``TFCLUSTER_E2E_NAMESPACE`` when set, else
the namespace of that kubeconfig's current context (``.ci/k8s.sh`` writes ``tfcluster-e2e`` there), else "default".
Read at test time, never at collection (the background start's kubeconfig is known only then).
``run_name(base)`` (``helpers.run_names``, re-exported here) is the one home of the runs' names: ``base`` and a
random suffix made once per session, so that two sessions in one namespace (CI and a developer, two developers) never take down each other's runs.
``demo_plan`` is a small real training run; ``supervise_until`` reads ``status`` as ``tfcluster up`` without the live
view does, until a condition holds;
``kill_9_task`` kills a task's process as a crash would (``run_in``: a Python snippet in a task's container, bounded;
``open_gate``: a gate file created there);
``cli`` runs the real ``tfcluster`` command; ``left_of`` lists what a run left in the namespace. ``SharedClaim``
is one claim for the session's runs of tiny programs (``helpers.k8s_start``'s ``shared_claim`` fixture): the test
cluster's volumes are a fixed pool (``.ci/k8s.sh``: 16, made anew only when it runs again), and a run's own claim
takes one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import k8s_start
from helpers.gates import touch
from helpers.required import unavailable
from helpers.run_names import SESSION_SUFFIX, run_name  # noqa: F401  (re-exported: the e2e tests import them here)
from helpers.task_kill import KILL_9_AGENT, KILL_9_TASK, NO_PROGRAM
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.manifests import CONTAINER
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR
from launcher.supervision.status import JobStatus

KUBECONFIG_ENV = "TFCLUSTER_E2E_KUBECONFIG"
NAMESPACE_ENV = "TFCLUSTER_E2E_NAMESPACE"
#: The cluster administrator's kubeconfig (what the launcher's Role may not read: nodes, other namespaces' pods).
ADMIN_KUBECONFIG_ENV = "TFCLUSTER_E2E_ADMIN_KUBECONFIG"
#: The longest a real run of these tests may take, and one wait for it (cut to the test's budget: ``k8s_start.time_left``).
TIMEOUT_SECONDS = k8s_start.RUN_SECONDS


def kubeconfig() -> str:
    """The real cluster's kubeconfig path (the e2e fixture made sure it is set)."""
    return os.environ[KUBECONFIG_ENV]


def from_kubeconfig_env() -> None:
    """For a script run by hand on the cluster of .ci/k8s.sh (bench/): these helpers pointed at ``$KUBECONFIG``
    (its context's namespace) unless ``TFCLUSTER_E2E_KUBECONFIG`` says otherwise; one line and exit 1 without it."""
    if not os.environ.get("KUBECONFIG"):
        raise SystemExit('needs the cluster of .ci/k8s.sh: eval "$(bash .ci/k8s.sh)"')
    os.environ.setdefault(KUBECONFIG_ENV, os.environ["KUBECONFIG"])


def admin_kubeconfig() -> str:
    """The cluster administrator's kubeconfig (for what the launcher's Role does not allow: the admission policy's
    checks, an eviction): ``TFCLUSTER_E2E_ADMIN_KUBECONFIG``, else the ``admin.kubeconfig`` .ci/k8s.sh writes beside
    the launcher's; none: ``unavailable``."""
    path = os.environ.get(ADMIN_KUBECONFIG_ENV) or str(Path(kubeconfig()).with_name("admin.kubeconfig"))
    if not Path(path).is_file():
        unavailable(f"needs the cluster administrator's kubeconfig: set {ADMIN_KUBECONFIG_ENV}", "e2e")
    return path


def namespace() -> str:
    """The namespace every object of the real-cluster tests goes to (see the module's contract)."""
    if os.environ.get(NAMESPACE_ENV):
        return os.environ[NAMESPACE_ENV]
    path = os.environ.get(KUBECONFIG_ENV)
    if path:
        from kubernetes import config

        _, active = config.list_kube_config_contexts(config_file=path)
        if active and active.get("context", {}).get("namespace"):
            return str(active["context"]["namespace"])
    return "default"


def image() -> str:
    """The worker image the cluster pulls (``TFCLUSTER_E2E_IMAGE``; default tfcluster-worker:latest)."""
    return os.environ.get("TFCLUSTER_E2E_IMAGE", "tfcluster-worker:latest")


def demo_plan(name: str, workers: int = 2, epochs: int = 2) -> Plan:
    """A chief and ``workers`` workers training ``epochs`` short epochs, restarted on an exit code, on a claim of
    their own."""
    claim = {"size": "1Gi"}
    if os.environ.get("TFCLUSTER_E2E_STORAGE_CLASS"):
        claim["storage_class"] = os.environ["TFCLUSTER_E2E_STORAGE_CLASS"]
    spec = validate_data(
        {
            "name": name,
            "image": image(),
            "roles": {"chief": {}, "worker": {"replicas": workers}},
            "training": {"epochs": epochs, "steps_per_epoch": 30, "batch_size_per_replica": 16},
            "checkpoint": {"backup_every_steps": 5},
            "restart": {"policy": "exit-code", "max_restarts": 3},
            "deadline_seconds": TIMEOUT_SECONDS,
            "kubernetes": {"namespace": namespace(), "volume_claim": claim},
        }
    )
    return api.plan(spec, "k8s", api.new_run_id())


#: The training module whose worker 1 blocks in its input pipeline, once (its docstring says how).
STUCK_INPUT = Path(__file__).parents[1] / "integration" / "scripts" / "stuck_input.py"


def stuck_input_plan(name: str, workspace: Path, pushed_to: str, stall: dict[str, Any], epochs: int = 2,
                     **args: str | int | float | bool) -> Plan:
    """``demo_plan(name)`` (a chief, two workers) training ``epochs`` of 20 steps of ``STUCK_INPUT``, shipped as the
    run's workspace layer (``workspace``, an empty directory, pushed to ``pushed_to``): worker 1 blocks in its input
    pipeline after ``block_after`` batches (for ever, or with ``hold_seconds`` that long at each later batch), while
    the marker on the run's claim does not exist (its first attempt; a restarted one finds the marker and runs to its
    end at full speed). ``args``: the module's; ``stall``: the run's stall watchdog."""
    (workspace / STUCK_INPUT.name).write_text(STUCK_INPUT.read_text())
    demo = demo_plan(name).spec.model_dump(mode="json", exclude_none=True)
    spec = validate_data({
        **{key: demo[key] for key in ("name", "image", "roles", "checkpoint", "restart", "deadline_seconds")},
        "workspace": str(workspace),
        "training": {"module": STUCK_INPUT.stem, "epochs": epochs, "steps_per_epoch": 20, "batch_size_per_replica": 16,
                     "args": {"train_examples": 512, "test_examples": 128,
                              "marker": f"{CONTAINER_CHECKPOINT_DIR}/blocked", **args}},
        "stall": stall,
        "kubernetes": {**demo["kubernetes"], "registry": pushed_to},
    })
    return api.plan(spec, "k8s", api.new_run_id())


def supervise_until(backend: KubernetesBackend, name: str, done: Callable[[JobStatus], bool],
                    timeout: float = TIMEOUT_SECONDS) -> JobStatus:
    """What a user's ``status`` shows, read every 2 s until ``done(status)`` (fails after ``timeout``): the run's
    one supervisor (its pod, or with ``kubernetes.supervisor: false`` its process on this machine) supervises it;
    nothing here does."""
    timeout = k8s_start.time_left(timeout)
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = backend.describe(name)
        assert status is not None
        if done(status):
            return status
        time.sleep(2)
    pytest.fail(f"timed out after {timeout:.0f} s; last status: {status}")


def until(what: str, found: Callable[[], Any], timeout: float = TIMEOUT_SECONDS, every: float = 2.0) -> Any:
    """``found()`` once it is truthy (polled every ``every`` seconds), else the test fails naming ``what``."""
    timeout = k8s_start.time_left(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def running_pod(core: Any, task: str) -> str:
    """The pod of ``task``'s Job (named ``<task>-xxxxx``; not one being deleted), once its container runs (the
    supervisor calls a task running from when it let its Job run)."""

    def found() -> str | None:
        selector = f"{naming.LABEL_CLUSTER}={task.rsplit('-', 2)[0]}"
        pods = core.list_namespaced_pod(namespace(), label_selector=selector).items
        return next((p.metadata.name for p in pods if p.metadata.name.startswith(f"{task}-")
                     and p.metadata.deletion_timestamp is None and p.status.phase == "Running"
                     and any(c.state.running for c in p.status.container_statuses or [])), None)

    return str(until(f"a running pod of {task}", found))


def kill_9_task(core: Any, pod: str) -> tuple[int | None, str, str]:
    """``kill -9`` of the task's program in ``pod`` through ``pods/exec`` (``KILL_9_TASK``; a crash, not a pod
    deletion, which a real kubelet turns into SIGTERM and a grace), once its agent started it (asked again until
    then: a kill of the agent itself would end the container, another path): the exec's exit status, stdout and
    stderr.

    PID 1 is the image's tini, which no signal from inside its namespace kills: the task's agent is its child and the
    program the agent's, whose run then ends 128 + 9; the agent, held, keeps the pod for the restart in place.
    ``core``: a ``CoreV1Api`` of the cluster."""
    answers: list[tuple[int | None, str, str]] = []

    def killed() -> bool:
        answers.append(run_in(core, pod, KILL_9_TASK))
        return answers[-1][1].strip() != NO_PROGRAM

    until(f"the program of {pod} started", killed, every=0.5)
    return answers[-1]


def kill_9_agent(core: Any, pod: str) -> tuple[int | None, str, str]:
    """``kill -9`` of the task's agent in ``pod`` (``KILL_9_AGENT``): a task restarted in a new pod, as ``kill_9_task``
    says."""
    return run_in(core, pod, KILL_9_AGENT)


#: The longest ``run_in`` waits for an exec to end.
EXEC_SECONDS = 60


def run_in(core: Any, pod: str, source: str) -> tuple[int | None, str, str]:
    """``python -c source`` in the task container of ``pod`` (``pods/exec``): its exit status, stdout and stderr.
    Bounded: an exec whose stream has not ended after ``EXEC_SECONDS`` (its container ended under it: the kubelet
    may then never close the stream) is closed, with exit status None and what it printed so far; nothing here
    waits for more output than has come."""
    from kubernetes.stream import stream

    ran = stream(core.connect_get_namespaced_pod_exec, pod, namespace(), container=CONTAINER,
                 command=["python", "-c", source], stdin=False, stdout=True, stderr=True, tty=False,
                 _preload_content=False)
    ran.run_forever(timeout=EXEC_SECONDS)
    out, err = ran.read_stdout(timeout=0), ran.read_stderr(timeout=0)
    if ran.is_open():
        ran.close()
        return None, out, err
    return ran.returncode, out, err


def open_gate(core: Any, pod: str, gate: Path) -> None:
    """Create ``gate`` in ``pod``'s task container (``helpers.gates.touch``), for a program that ends once it exists.
    The exec either ends 0, or does not end (``run_in``'s None) because the container it ran in ended with the
    program it let go: then the container must have ended, else the test fails with what the exec said."""
    code, out, err = run_in(core, pod, touch(gate))
    if code is None:
        status = core.read_namespaced_pod(pod, namespace()).status
        ended = any(c.name == CONTAINER and c.state.terminated for c in status.container_statuses or [])
        assert ended, f"the exec creating {gate} in {pod} did not end within {EXEC_SECONDS} s: {out!r} {err!r}"
        return
    assert code == 0, (pod, code, out, err)


def cli(*args: str, cwd: Path, timeout: float = 900, registry: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``tfcluster`` command as the launcher's user, in this test's TFCLUSTER_HOME (``registry``: its
    TFCLUSTER_REGISTRY)."""
    env = {**os.environ, "KUBECONFIG": kubeconfig(), **({"TFCLUSTER_REGISTRY": registry} if registry else {})}
    return subprocess.run([sys.executable, "-m", "launcher", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=k8s_start.time_left(timeout))


def supervisor_pods(core: Any, name: str) -> list[Any]:
    """The pods of run ``name``'s supervisor in the tests' namespace (``naming.LABEL_SUPERVISOR``), oldest first."""
    selector = f"{naming.LABEL_SUPERVISOR}={name}"
    return sorted(core.list_namespaced_pod(namespace(), label_selector=selector).items,
                  key=lambda p: p.metadata.creation_timestamp)


def left_of(name: str, core: Any) -> list[str]:
    """Every object of the run's labels (``naming.LABEL_CLUSTER``) still in the namespace, as ``kind/name``."""
    from kubernetes import client

    apis = {"core": core, "batch": client.BatchV1Api(core.api_client), "net": client.NetworkingV1Api(core.api_client),
            "scheduling": client.SchedulingV1beta1Api(core.api_client)}
    listed = [(kind, apis["core"], kind) for kind in ("pod", "service", "config_map", "service_account",
                                                      "persistent_volume_claim")]
    listed += [("job", apis["batch"], "job"), ("network_policy", apis["net"], "network_policy"),
               ("pod_group", apis["scheduling"], "pod_group")]
    selector = f"{naming.LABEL_CLUSTER}={name}"
    return sorted(f"{kind}/{obj.metadata.name}" for kind, api_, method in listed
                  for obj in getattr(api_, f"list_namespaced_{method}")(namespace(), label_selector=selector).items)


#: The registry a developer's cluster's nodes pull from, as .ci/k8s.sh exports it (read here: tests/conftest.py hides it
#: from each test, so that no other test takes it as `--registry`'s default).
EXPORTED_REGISTRY = os.environ.get("TFCLUSTER_REGISTRY")


def registry() -> str | None:
    """The registry of the cluster scripts/test.sh started (known only once it started), else the exported one."""
    started = k8s_start.await_start()
    return started.exports.get("TFCLUSTER_REGISTRY") if started is not None else EXPORTED_REGISTRY


class SharedClaim:
    """One ReadWriteMany claim (``run_name("e2e-shared")``) that runs name as ``kubernetes.volume_claim.name`` (so
    none makes a claim of its own, and ``down --volumes`` keeps it): made and bound at the first ``name()``, deleted
    by ``delete()`` (the session's end). Each run keeps its files in a directory of its own there.

    Bound before any run uses it: the test cluster's class binds a claim at its first pod (``WaitForFirstConsumer``),
    and pods that start together race to bind it (the scheduler's PreBind: "the object has been modified"); a gang's
    pods that lose that race go back to the queue after the others were bound, leaving the run half-placed (seen
    once by ``test_k8s_e2e_gang.py``'s first test, the session's first to name the claim)."""

    def __init__(self) -> None:
        self._made: tuple[Any, str, str] | None = None

    def name(self) -> str:
        if self._made is None:
            from kubernetes import client, config

            core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig()))
            name = run_name("e2e-shared")
            spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
            if os.environ.get("TFCLUSTER_E2E_STORAGE_CLASS"):
                spec["storageClassName"] = os.environ["TFCLUSTER_E2E_STORAGE_CLASS"]
            where = namespace()  # kept: at the session's end the environment that names it may be gone
            core.create_namespaced_persistent_volume_claim(where, {"metadata": {"name": name}, "spec": spec})
            self._made = core, name, where
            _bind(core, name, where)
        return self._made[1]

    def delete(self) -> None:
        if self._made is not None:
            core, name, where = self._made
            core.delete_namespaced_persistent_volume_claim(name, where)
            self._made = None


def _bind(core: Any, claim: str, where: str) -> None:
    """Claim ``claim`` bound: by a Job whose one pod mounts it and exits (the launcher's Role creates no pod), waited
    for, then deleted."""
    from kubernetes import client

    batch = client.BatchV1Api(core.api_client)
    job = f"{claim}-bind"
    container = {"name": "bind", "image": image(), "command": ["true"],
                 "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "volumeMounts": [{"name": "claim", "mountPath": "/claim"}]}
    pod = {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [container],
           "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
           "volumes": [{"name": "claim", "persistentVolumeClaim": {"claimName": claim}}]}
    batch.create_namespaced_job(where, {"metadata": {"name": job}, "spec": {"backoffLimit": 0, "template": {"spec": pod}}})
    try:
        until(f"claim {claim} bound", lambda: core.read_namespaced_persistent_volume_claim(claim, where).status.phase == "Bound",
              every=0.5)
    finally:
        batch.delete_namespaced_job(job, where, propagation_policy="Background")
