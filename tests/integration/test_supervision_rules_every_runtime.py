"""One supervision test suite over every backend's runtime, so that no backend can skip a rule (issue #35).

The ``runtime`` fixture is parametrized over every backend's ``Runtime``: local processes, compose containers
(``docker``), Slurm job steps (``slurm``) and Kubernetes Jobs on the real cluster (``e2e``). Each test submits the
same small job (tasks are ``python -c`` programs, no TensorFlow) through the backend, so the one ``Supervisor``
runs in that backend's host over its runtime, and reads the status the backend publishes. On Kubernetes the
Jobs are applied suspended (``apply.submit``, ``kubernetes.supervisor: false``) and the ``Supervisor`` runs in
this test process over ``KubernetesRuntime``, publishing to the run's ConfigMap as its pod would (``ConfigMapStore``),
which ``describe`` reads; the tasks' marker files are on the run's claim. Programs are ordered by
marker files in the checkpoint dir as the tasks see it (``helpers.gates``), never by sleeping; every wait is
for an event, bounded generously.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import k8s_e2e
from helpers.docker_engine import IMAGE, compose_cli, docker_engine  # noqa: F401
from helpers.gates import BLOCK, first_run, touch, wait_for
from helpers.local_cluster import task_groups
from helpers.required import unavailable
from helpers.run_names import run_name
from helpers.slurm_cluster import slurm_controller, task_processes  # noqa: F401
from helpers.task_events import print_events
from launcher import api
from launcher.backends.compose.backend import ComposeBackend
from launcher.backends.compose.render import PROJECT_LABEL
from launcher.backends.interface import Backend, BackendOptions
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.backends.kubernetes.cluster_state import ConfigMapStore
from launcher.backends.kubernetes.kubeapi import Kind
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.local.backend import LocalBackend
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.errors import LaunchError
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR
from launcher.spec.models import RoleType
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor

#: Bound on a job reaching the state a test waits for (a loaded host, containers, Slurm's scheduler).
TIMEOUT = 240
#: The deadline of the job that runs past it (from the job's start: its tasks may still be starting then).
DEADLINE_SECONDS = 10


@dataclass
class Runtime:
    """Submits jobs to one backend and tells, from outside, what of a job still runs.

    ``markers`` is the checkpoint dir as the tasks see it (where the programs' marker files go);
    ``checkpoint`` the spec's ``checkpoint`` field giving it; ``running`` lists what of job ``name`` still runs.
    """

    kind: str
    backend: Backend[Any]
    markers: Path
    checkpoint: dict[str, Any]
    running: Callable[[str], list[str]]
    tmp_path: Path
    launched: list[str] = field(default_factory=list)
    #: The plan of each job launched, by name (its tasks' names: ``named`` and the backend's naming).
    plans: dict[str, Plan] = field(default_factory=dict)
    #: The spec's fields this backend needs (Kubernetes: the image, namespace and claim), and the job's name.
    fields: dict[str, Any] = field(default_factory=dict)
    #: Makes a job's name unique to this session (``helpers.run_names``): teardown removes only this session's jobs.
    named: Callable[[str], str] = run_name
    #: Submits a dry run (default: the backend's ``submit``), and stops the job's supervisor before ``down``.
    submit: Callable[[DryRun], None] | None = None
    before_down: Callable[[str], None] = lambda name: None
    #: Run first by every task's ``python -c`` program (Kubernetes: it makes the job's marker dir on the claim).
    prologue: str = ""

    def up(self, name: str, roles: dict[str, Any], **fields: Any) -> None:
        if self.prologue:
            roles = {role: {**fields_, "command": [*fields_["command"][:2], f"{self.prologue}\n{fields_['command'][2]}"]}
                     for role, fields_ in roles.items()}
        spec = {"name": self.named(f"h15-{self.kind[:3]}-{name}"), "roles": roles,
                "checkpoint": {**self.checkpoint, **fields.pop("checkpoint", {})}, **self.fields, **fields}
        path = self.tmp_path / f"{spec['name']}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        dry_run = api.dry_run(path, self.kind, api.new_run_id(), launching=True)
        self.launched.append(dry_run.plan.name)
        self.plans[dry_run.plan.name] = dry_run.plan
        (self.submit or self.backend.submit)(dry_run)

    def cancel(self, name: str) -> None:
        """``down`` of job ``name``: its supervisor stopped first; with the volumes tfcluster made for it."""
        self.before_down(name)
        self.backend.cancel(name, volumes=self.kind in ("compose", "k8s"))

    def wait(self, until: Callable[[JobStatus], bool] | None = None) -> JobStatus:
        """The job's published status once ``until`` holds; by default once the job and each of its tasks are
        terminal (the supervisor publishes the job's end, then stops the tasks left and publishes again)."""
        until = until or (lambda job: job.state.terminal and all(t.state.terminal for t in job.tasks))
        name = self.launched[-1]
        ends = time.monotonic() + TIMEOUT
        while True:
            job = self.backend.describe(name)
            if job is not None and until(job):
                return job
            assert time.monotonic() < ends, f"{name}: still {job} after {TIMEOUT} s"
            time.sleep(0.5)

    def down_all(self) -> None:
        for name in self.launched:
            try:
                self.cancel(name)
            except LaunchError:
                pass  # the test took it down already


def _local(tmp_path: Path) -> Runtime:
    def running(name: str) -> list[str]:
        return [f"process group {g}" for g in task_groups(name)]

    ckpt = tmp_path / "ckpt"
    return Runtime("local", LocalBackend(), ckpt, {"dir": str(ckpt)}, running, tmp_path)


def _compose(tmp_path: Path, engine: Any) -> Runtime:
    if not engine.images.list(name=IMAGE):
        unavailable(f"{IMAGE} is not built (.ci/docker.sh builds it; this suite does not rebuild a shared image)",
                    "docker")

    def running(name: str) -> list[str]:
        containers = engine.containers.list(filters={"label": f"{PROJECT_LABEL}={name}"}, ignore_removed=True)
        return [f"container {c.name} ({c.status})" for c in containers]

    return Runtime("compose", ComposeBackend.create(BackendOptions()), Path("/checkpoints"), {}, running, tmp_path)


def _slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    def running(name: str) -> list[str]:
        job_id = SlurmState.named(name).read_job_id() if SlurmState.named(name).exists() else None
        job = slurmctl.job(job_id) if job_id else None
        left = [f"Slurm job {job_id} ({job})"] if job is not None and not job.ended else []
        return left + [f"process {pid}" for pid in task_processes(name)]

    monkeypatch.chdir(tmp_path)  # the submit dir: a relative checkpoint dir is on the shared filesystem (this host)
    return Runtime("slurm", SlurmBackend(), tmp_path / "ckpt", {"dir": "ckpt"}, running, tmp_path)


def _kubernetes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claim: k8s_e2e.SharedClaim) -> Runtime:
    """The real cluster: each job's Jobs applied suspended, its ``Supervisor`` in a thread of this process (then its
    runtime closed, as the supervisor process closes it: the held agents quit); the
    markers in a directory of the test's own on the session's shared claim (the cluster's volumes are few)."""
    monkeypatch.setenv("KUBECONFIG", k8s_e2e.kubeconfig())
    backend = KubernetesBackend.create(KubernetesOptions(namespace=k8s_e2e.namespace()))
    supervisors: dict[str, tuple[Supervisor, threading.Thread]] = {}

    def submit(dry_run: DryRun) -> None:
        plan = dry_run.plan
        apply.submit(backend.api, dry_run, k8s_e2e.namespace())
        store = ConfigMapStore(backend.api, plan.name, k8s_e2e.namespace(), in_pod=False)
        runtime = KubernetesRuntime(backend.api, plan, k8s_e2e.namespace())
        supervisor = Supervisor(plan, runtime, on_status=store.write_status, keep_stacks=store.keep_stacks)

        def supervise() -> None:  # as the supervisor process does (``harness.run_supervisor``): its runtime closed
            supervisor.run()
            runtime.close()  # each task's held agent told to quit: its pod ends as its last run did

        thread = threading.Thread(target=supervise, name=f"supervisor of {plan.name}", daemon=True)
        supervisors[plan.name] = supervisor, thread
        thread.start()

    def stop_supervisor(name: str) -> None:
        if name in supervisors:
            supervisor, thread = supervisors.pop(name)
            supervisor.cancel()
            thread.join(TIMEOUT)
            assert not thread.is_alive(), f"the supervisor of {name} did not stop"

    def running(name: str) -> list[str]:
        pods = apply.of_cluster(backend.api, Kind.POD, k8s_e2e.namespace(), name)
        return [f"pod {p['metadata']['name']} ({p['status'].get('phase')})" for p in pods
                if p.get("status", {}).get("phase", "Pending") in ("Pending", "Running")]

    markers = Path(CONTAINER_CHECKPOINT_DIR) / tmp_path.name
    fields = {"image": k8s_e2e.image(), "kubernetes": {"namespace": k8s_e2e.namespace(), "supervisor": False,
                                                        "volume_claim": {"name": claim.name()}}}
    return Runtime("k8s", backend, markers, {}, running, tmp_path, fields=fields,
                   submit=submit, before_down=stop_supervisor,
                   prologue=f"import os; os.makedirs({str(markers)!r}, exist_ok=True)")


#: The runtimes on this host (Kubernetes' is the real cluster's).
HOST_RUNTIMES = [pytest.param("local"), pytest.param("compose", marks=pytest.mark.docker),
                 pytest.param("slurm", marks=pytest.mark.slurm)]


@pytest.fixture(params=[*HOST_RUNTIMES, pytest.param("k8s", marks=pytest.mark.e2e)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "compose":
        request.getfixturevalue("compose_cli")
        made = _compose(tmp_path, request.getfixturevalue("docker_engine"))
    elif request.param == "slurm":
        request.getfixturevalue("slurm_controller")
        made = _slurm(tmp_path, request.getfixturevalue("monkeypatch"))
    elif request.param == "k8s":
        made = _kubernetes(tmp_path, request.getfixturevalue("monkeypatch"), request.getfixturevalue("shared_claim"))
    else:
        made = _local(tmp_path)
    yield made
    made.down_all()


def command(script: str) -> list[str]:
    return ["python", "-c", script]


def fails_first(marker: Path, code: int, after: Path) -> list[str]:
    """A program exiting ``code`` on its first run, once ``after`` exists, and 0 on the later ones."""
    return command(first_run(marker, f"{wait_for(after)}\nprint('first run fails', flush=True); sys.exit({code})",
                             "print('later run ok', flush=True)"))


def nothing_runs(runtime: Runtime, name: str) -> list[str]:
    """What of job ``name`` still runs, once it stopped running or after a bound (a stop takes its grace)."""
    ends = time.monotonic() + 60
    while (left := runtime.running(name)) and time.monotonic() < ends:
        time.sleep(0.5)
    return left


def test_a_task_failing_once_restarts_the_group_and_the_job_succeeds(runtime: Runtime) -> None:
    # the worker fails once the chief's first run runs (it lives until the gang restart stops it); later runs end
    runtime.up("once", {"chief": {"command": command(first_run(runtime.markers / "c", BLOCK))},
                        "worker": {"replicas": 1, "command": fails_first(runtime.markers / "w", 3, after=runtime.markers / "c")}})
    job = runtime.wait()
    assert job.state is State.SUCCEEDED, job.message
    assert job.restarts == 1 and [t.restarts for t in job.tasks] == [1, 1], job


def test_logs_follow_shows_every_run_of_a_task_and_ends_once_the_job_has(runtime: Runtime) -> None:
    # ``logs NAME TASK -f`` from right after ``up`` (the worker's first run waits for the chief's: it has not ended):
    # the worker's first run, then the run its supervisor restarted, each line once, then it ends by itself
    runtime.up("follow", {"chief": {"command": command(first_run(runtime.markers / "c", BLOCK))},
                          "worker": {"replicas": 1, "command": fails_first(runtime.markers / "w", 3, after=runtime.markers / "c")}})
    name = runtime.launched[-1]
    [worker] = [t.name for t in runtime.plans[name].tasks if t.type is RoleType.WORKER]
    lines: list[str] = []
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            lines.extend(runtime.backend.logs(name, worker, follow=True))
        except BaseException as exc:  # noqa: BLE001 - the test thread reports it
            failed.append(exc)

    follower = threading.Thread(target=follow, name=f"logs -f {worker}", daemon=True)
    follower.start()
    job = runtime.wait()
    assert job.state is State.SUCCEEDED, job.message
    follower.join(TIMEOUT)
    assert not follower.is_alive(), f"logs -f still follows {worker} after the job ended; so far: {lines}"
    assert not failed, failed
    assert [line for line in lines if line in ("first run fails", "later run ok")] == ["first run fails",
                                                                                        "later run ok"], lines


def test_a_failure_rule_fails_the_job_at_once_naming_the_rule(runtime: Runtime) -> None:
    # without the rule the worker's second run would succeed: the on-failure policy would restart it
    runtime.up("rule", {"chief": {"command": command(first_run(runtime.markers / "c", BLOCK))},
                        "worker": {"replicas": 1, "command": fails_first(runtime.markers / "w", 3, after=runtime.markers / "c")}},
               restart={"max_restarts": 5, "rules": [{"exit_codes": [3], "action": "fail"}]})
    job = runtime.wait()
    assert job.state is State.FAILED, job.message
    assert job.message.startswith("failed: rule 1 (exit code 3): fail: task "), job.message
    assert "-worker-0 exited with code 3" in job.message, job.message
    assert job.restarts == 0 and [t.restarts for t in job.tasks] == [0, 0], job


def test_a_task_failing_every_time_fails_the_job_once_the_restart_budget_is_used(runtime: Runtime) -> None:
    runtime.up("budget", {"chief": {"command": command(BLOCK)},
                          "worker": {"replicas": 1, "command": command("import sys; sys.exit(4)")}},
               restart={"max_restarts": 2})
    job = runtime.wait()
    assert job.state is State.FAILED, job.message
    assert job.restarts == 2, job
    assert "-worker-0 exited with code 4 and the restart budget (2) is used up" in job.message, job.message


def test_a_preemption_past_max_preemptions_fails_the_job_as_a_failure(runtime: Runtime) -> None:
    # the worker exits 143 (as a task that saved on a termination notice does) once the chief runs: within
    # max_preemptions it would restart its group under every policy; past it (0) it is a failure, and ``never``
    # restarts no failure
    runtime.up("preempt", {"chief": {"command": command(first_run(runtime.markers / "c", BLOCK))},
                           "worker": {"replicas": 1,
                                      "command": fails_first(runtime.markers / "w", 143, after=runtime.markers / "c")}},
               restart={"policy": "never", "max_preemptions": 0})
    job = runtime.wait()
    assert job.state is State.FAILED, job.message
    assert "-worker-0 exited with code 143 (restart policy never)" in job.message, job.message
    assert (job.restarts, job.preemptions) == (0, 0), job


def test_a_job_past_its_deadline_fails_and_leaves_no_task_running(runtime: Runtime) -> None:
    runtime.up("deadline", {"chief": {"command": command(BLOCK)}, "worker": {"replicas": 1, "command": command(BLOCK)}},
               deadline_seconds=DEADLINE_SECONDS)
    job = runtime.wait()
    assert job.state is State.FAILED and job.message == f"failed: deadline of {DEADLINE_SECONDS} s exceeded", job
    assert nothing_runs(runtime, runtime.launched[-1]) == []


def test_down_leaves_no_task_running(runtime: Runtime) -> None:
    runtime.up("down", {"chief": {"command": command(BLOCK)}, "worker": {"replicas": 2, "command": command(BLOCK)}})
    name = runtime.launched[-1]
    runtime.wait(lambda job: len(job.tasks) == 3 and all(t.state is State.RUNNING for t in job.tasks))
    assert runtime.running(name), "the check from outside sees nothing of a running job"
    runtime.cancel(name)
    assert nothing_runs(runtime, name) == []


def test_a_chief_that_succeeds_while_a_worker_runs_succeeds_the_job_and_stops_the_worker(runtime: Runtime) -> None:
    # the default success policy (``chief``): the job is done once the chief is; the worker is stopped
    runtime.up("chief", {"chief": {"command": command("print('done')")},
                         "worker": {"replicas": 1, "command": command(BLOCK)}})
    job = runtime.wait()
    assert job.state is State.SUCCEEDED, job.message
    assert [(t.name.rsplit("-", 2)[1], t.state) for t in job.tasks] == [("chief", State.SUCCEEDED),
                                                                         ("worker", State.CANCELLED)], job
    assert nothing_runs(runtime, runtime.launched[-1]) == []


#: The stalled run's backups: every 5 steps; its lead stalls after step 7, so its restart redoes steps 6 and 7.
BACKUP_EVERY, STALLED_AT, LAST_STEP = 5, 7, 10


@pytest.mark.parametrize("runtime", HOST_RUNTIMES, indirect=True)
def test_a_stalled_lead_restarts_its_group_not_the_evaluator_and_goodput_counts_the_steps_done_again(
        runtime: Runtime) -> None:
    """A task alive but stuck, and an evaluator, in one run. The evaluator fails once (restarted alone); then the
    chief reports steps 1..7 and blocks, alive: the stall watchdog (no stacks tell it anything: on time alone,
    past ``stall.timeout_seconds``) restarts the training group, not the evaluator. The chief's next run restores
    the backup of step 5 (the last at or before step 7, every ``BACKUP_EVERY`` steps), reports up to step 10 and
    finishes: goodput counts steps 6 and 7 as done again. (Kubernetes: ``tests/e2e/test_k8s_e2e_stall_goodput.py``.)"""
    gate, again, done = runtime.markers / "c", runtime.markers / "e-again", runtime.markers / "done"
    restored = STALLED_AT // BACKUP_EVERY * BACKUP_EVERY
    first = f"{wait_for(again)}\n{print_events(*({'event': 'step', 'step': s} for s in range(1, STALLED_AT + 1)))}\n{BLOCK}"
    later = "\n".join([print_events({"event": "restored", "epoch": 0, "step": restored},
                                     *({"event": "step", "step": s} for s in range(restored + 1, LAST_STEP + 1)),
                                     {"event": "finished"}), touch(done)])
    evaluator = first_run(runtime.markers / "e", f"{wait_for(gate)}\nsys.exit(3)", f"{touch(again)}\n{wait_for(done)}")
    runtime.up("stall", {"chief": {"command": command(first_run(gate, first, later))},
                         "worker": {"replicas": 1, "command": command(first_run(runtime.markers / "w", BLOCK, wait_for(done)))},
                         "evaluator": {"replicas": 1, "command": command(evaluator)}},
               checkpoint={"backup_every_steps": BACKUP_EVERY}, restart={"max_restarts": 3},
               stall={"timeout_seconds": 5})
    job = runtime.wait()
    name = runtime.launched[-1]
    assert job.state is State.SUCCEEDED, job.message
    stall = job.stall
    assert stall is not None and stall.stalls == 1 and stall.evidence is StallEvidence.TIME_ONLY, stall
    assert stall.message.endswith(f"restarting {name}-chief-0, {name}-worker-0 (restart 2/3)"), stall.message
    assert job.restarts == 2, job  # the evaluator's, then the training group's
    roles = {t.name.rsplit("-", 2)[1]: t for t in job.tasks}
    assert {role: t.restarts for role, t in roles.items()} == {"chief": 1, "worker": 1, "evaluator": 1}, job
    assert roles["evaluator"].state is State.SUCCEEDED, job
    assert job.progress.step == LAST_STEP, job.progress
    goodput = job.goodput
    assert goodput is not None and goodput.recomputed_steps == STALLED_AT - restored == 2, goodput
    assert goodput.lost_seconds.stalls > 0, goodput
    assert nothing_runs(runtime, name) == []
