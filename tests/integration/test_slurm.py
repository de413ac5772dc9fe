"""The Slurm backend on a real Slurm cluster (three nodes on this host, ``.ci/slurm.sh``), with real TensorFlow.

Each test launches with the real CLI (``-b slurm``), follows the job through
``SlurmBackend.describe`` and checks the outcome against the controller
(``scontrol``/``squeue``) and this host's processes (every node is this
host, so every task process is visible here). Every job is taken ``down``
at teardown. Runs stay short: a few steps of the bundled MNIST model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.boards import free_port, scalar_curves, start_board, stop_board
from helpers.goodput_checks import assert_restarts_accounted
from helpers.local_cluster import tfcluster, write_spec
from helpers.polling import wait_for_condition
from helpers.run_names import run_name
from helpers.slurm_cluster import (  # noqa: F401
    assert_nothing_left,
    job_id,
    slurm_controller,
    task_process,
    task_processes,
    wait_status,
)
from helpers.task_events import read_events, run_token
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.backends.slurm.status import REQUEUEING
from launcher.backends.slurm.steps import STANDBY_SUFFIX
from launcher.plan.targets import BackendKind
from launcher.protocol.events import Event, Preempted, Restored
from launcher.protocol.standby import READY_LINE
from launcher.supervision.status import JobStatus, State

pytestmark = [pytest.mark.slurm, pytest.mark.tf, pytest.mark.usefixtures("slurm_controller")]

TRAINING = {"epochs": 2, "steps_per_epoch": 10, "batch_size_per_replica": 32}
BACKUP_EVERY = 5
#: Where the killed run stands: past the backup of step 5, a step the chief reports (``launcher.worker.train``'s
#: ``STEP_EVENTS_PER_EPOCH``: four times an epoch, every 2 of its 10 steps).
STOPPED_AT = 8
MWMS = {"chief": {"replicas": 1}, "worker": {"replicas": 2}}
ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[list[str]]:
    """Names launched by a test; each is taken down (and must leave nothing) afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if SlurmState.named(name).exists():
            ran = job_id(name)
            tfcluster("down", name, "-b", "slurm", cwd=tmp_path, timeout=180)
            assert_nothing_left(name, ran)


def launch(tmp_path: Path, launched: list[str], spec: dict[str, Any]) -> str:
    spec = {"env": {"TF_CPP_MIN_LOG_LEVEL": "2"}, **spec, "training": {**TRAINING, **spec.get("training", {})}}
    launched.append(spec["name"])
    result = tfcluster("up", "-b", "slurm", "--detach", str(write_spec(tmp_path, spec)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return spec["name"]


def events(name: str, task: str) -> list[Event]:
    return read_events(SlurmState.named(name).task_log(task).read_text().splitlines(), run_token(BackendKind.SLURM, name))


def finish(name: str) -> JobStatus:
    """Wait for the job to end: it must have succeeded, its allocation ended, no task process left."""
    ran = job_id(name)
    status = wait_status(name, lambda s: s.state.terminal, timeout=300)
    state = SlurmState.named(name)
    lead = state.task_log(status.tasks[0].name).read_text()[-2000:]
    batch = (state.root / "batch.log").read_text()[-2000:]
    assert status.state is State.SUCCEEDED, f"{status.message}\n{lead}\nbatch step:\n{batch}"
    assert_nothing_left(name, ran)
    return status


def step_nodes(name: str) -> dict[str, str]:
    """``{step (task) name: node}`` of the job's running task steps (not the standbys')."""
    out = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id(name)), "-o", "%j %N"], capture_output=True,
                         text=True, timeout=30).stdout
    return dict(line.split() for line in out.splitlines()
                if line.startswith(f"{name}-") and STANDBY_SUFFIX not in line.split()[0])


def test_demo_trains_with_its_tasks_on_three_nodes_and_tensorboard_shows_its_curves(tmp_path: Path, launched: list[str]) -> None:
    name = launch(tmp_path, launched, {"name": run_name("sl-demo"), "roles": MWMS})
    ends = time.monotonic() + 180
    while len(nodes := step_nodes(name)) < 3:
        assert time.monotonic() < ends, f"steps seen: {nodes}; status: {wait_status(name, lambda s: True, 5)}"
        time.sleep(0.5)
    assert sorted(nodes.values()) == ["n1", "n2", "n3"], nodes
    allocation = SlurmState.named(name).read_allocation()
    assert allocation is not None and sorted(allocation.nodes) == ["n1", "n2", "n3"]
    status = finish(name)
    assert status.progress.step == 20 and (status.restarts, status.preemptions) == (0, 0), status
    planned = json.loads(tfcluster("dry-run", "-b", "slurm", "-o", "json", f"{name}.yaml", cwd=tmp_path).stdout)
    assert planned["tasks"][1]["address"] == "${node:1}:${port:1}"  # resolved in the allocation: n2 is 127.0.0.1
    port = free_port()  # tensorboard -b slurm: a local TensorBoard over the run's dir on the shared filesystem
    board, url = start_board([name], port, tmp_path, "-b", "slurm")
    try:
        assert url == f"http://127.0.0.1:{port}/"
        curves = scalar_curves(url, [f"{name}/train"], "loss")
        assert [int(step) for _, step, _ in curves[f"{name}/train"]][-1] == 20
    finally:
        stop_board(board, port)


def test_parameter_server_job_succeeds_and_leaves_no_process(tmp_path: Path, launched: list[str]) -> None:
    name = launch(tmp_path, launched, {"name": run_name("sl-pss"), "roles": {**MWMS, "ps": {"replicas": 1}},
                                       "training": {"epochs": 1}})
    status = finish(name)
    assert status.tasks[0].exit_code == 0 and status.restarts == 0, status


def test_run_an_unmodified_multi_worker_script(tmp_path: Path, launched: list[str]) -> None:
    (tmp_path / "train.py").write_text((ROOT / "examples" / "byo" / "train.py").read_text())
    launched.append("train")
    result = tfcluster("run", "-b", "slurm", "--workers", "3", "train.py", "--epochs", "1", cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    status = finish("train")
    assert [t.exit_code for t in status.tasks] == [0, 0, 0]
    for index in range(3):
        log = SlurmState.named("train").task_log(f"train-worker-{index}").read_text()
        assert f"worker {index} done, 3 replicas" in log, log[-2000:]


def test_kill_9_of_a_worker_restarts_the_group_in_its_standby_steps_from_the_backup(tmp_path: Path,
                                                                                   launched: list[str]) -> None:
    """The restart reuses what the allocation already runs: each task becomes its standby step (started with the
    first runs, TensorFlow imported), no new srun of a task, and the run resumes from its backup. Worker 1 is
    killed while the test holds every task at step ``STOPPED_AT``: worker 1 blocks in its next step (once, before
    the step's all-reduce; ``stuck_input``'s step gate), so goodput's steps done again are known exactly."""
    (tmp_path / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    blocked = tmp_path / "blocked"
    name = launch(tmp_path, launched, {"name": run_name("sl-kill"), "roles": MWMS, "restart": {"max_restarts": 1},
                                       "checkpoint": {"backup_every_steps": BACKUP_EVERY},
                                       "stall": {"action": "warn"},  # held while the standbys start: no restart
                                       "training": {"loop": "custom", "module": "stuck_input",
                                                    "args": {"marker": str(blocked), "block_after": STOPPED_AT,
                                                             "block_in": "step"}}})
    wait_status(name, lambda s: blocked.exists() or s.state.terminal, timeout=240)
    assert blocked.exists(), "worker 1 did not block"
    tasks = [f"{name}-chief-0", f"{name}-worker-0", f"{name}-worker-1"]
    logs = SlurmState.named(name).logs
    ends = time.monotonic() + 120
    while not all(READY_LINE in _text(logs / f"{task}.standby.log") for task in tasks):
        assert time.monotonic() < ends, "the standbys did not say they were ready"
        time.sleep(0.2)
    standby_steps = {step for step, step_name in running_steps(name).items() if STANDBY_SUFFIX in step_name}
    assert len(standby_steps) == 3, running_steps(name)
    killed = time.time()
    os.kill(task_process(name, f"{name}-worker-1"), signal.SIGKILL)
    wait_status(name, lambda s: s.restarts == 1 and s.state is State.RUNNING, timeout=120)
    running = running_steps(name)
    assert not set(tasks) & set(running.values()), f"a task started in a new step: {running}"
    assert standby_steps <= set(running), (standby_steps, running)  # the same steps, now the tasks
    status = finish(name)
    assert (status.restarts, status.preemptions) == (1, 0) and all(t.restarts == 1 for t in status.tasks), status
    for task in tasks:
        assert any(e.event == "warm_start" and e.time > killed for e in events(name, task)), f"{task}: no warm start"
    chief = events(name, f"{name}-chief-0")
    [restored] = [e for e in chief if e.event == "restored"]
    assert any(e.event == "finished" for e in chief[chief.index(restored):])
    assert_restarts_accounted(status.goodput, chief, STOPPED_AT, BACKUP_EVERY)  # the restart's cost, the steps again



def running_steps(name: str) -> dict[str, str]:
    """``{JOB.STEP: step name}`` of the job's running steps."""
    out = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id(name)), "-o", "%i|%j"], capture_output=True,
                         text=True, timeout=30).stdout
    return dict(line.strip().split("|", 1) for line in out.splitlines() if "|" in line)


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def test_down_leaves_no_job_and_no_process(tmp_path: Path, launched: list[str]) -> None:
    name = launch(tmp_path, launched, {"name": run_name("sl-down"), "roles": MWMS, "training": {"epochs": 50}})
    wait_status(name, lambda s: (s.progress.step or 0) >= 1, timeout=240)
    ran = job_id(name)
    assert task_processes(name)
    result = tfcluster("down", name, cwd=tmp_path, timeout=180)
    assert result.returncode == 0, result.stderr
    assert_nothing_left(name, ran)
    job = slurmctl.job(str(ran))
    assert job is None or job.ended, job
    assert not SlurmState.named(name).exists()


def launch_to_be_requeued(tmp_path: Path, launched: list[str], base: str) -> tuple[str, str]:
    """A run with no periodic backup (only the save on a notice keeps its progress), under way: (name, job id)."""
    name = launch(tmp_path, launched, {"name": run_name(base), "roles": MWMS, "restart": {"max_restarts": 0},
                                       "checkpoint": {"backup_every_steps": 1000, "save_grace_seconds": 30},
                                       "training": {"epochs": 4}})
    wait_status(name, lambda s: (s.progress.step or 0) >= 3, timeout=240)
    return name, str(job_id(name))


def saved_on_the_notice(name: str) -> Preempted:
    """The chief's one ``preempted`` event: the step every task saved when it was stopped."""
    [preempted] = [e for e in events(name, f"{name}-chief-0") if isinstance(e, Preempted)]
    assert preempted.step is not None and preempted.step > 0, preempted
    return preempted


def test_a_requeue_is_a_preemption_resumed_where_it_saved(tmp_path: Path, launched: list[str]) -> None:
    """An administrator's ``scontrol requeue``: Slurm SIGTERMs the job, every task saves, the requeued allocation
    counts one preemption and resumes at the saved step. (Slurm's warning takes the same requeued allocation:
    ``test_slurms_time_limit_warning_saves_every_task_and_requeues_the_job``.)"""
    name, ran = launch_to_be_requeued(tmp_path, launched, "sl-scontrol")
    slurmctl.requeue(ran)
    wait_status(name, lambda s: s.state is State.RESTARTING and "requeued" in s.message.lower(), timeout=120)
    status = finish(name)
    assert (status.restarts, status.preemptions) == (0, 1), status
    assert all(t.preemptions == 1 for t in status.tasks), status
    preempted = saved_on_the_notice(name)
    [restored] = [e for e in events(name, f"{name}-chief-0") if isinstance(e, Restored)]
    assert restored.step == preempted.step, (preempted, restored)  # saved on the notice: nothing lost


def test_slurms_time_limit_warning_saves_every_task_and_requeues_the_job(tmp_path: Path, launched: list[str]) -> None:
    """``USR1`` to the batch step (the warning ``--signal=B:USR1@...`` asks Slurm for before the time limit): the
    supervisor stops every task, which saves, then requeues the job itself. Checked up to the requeue, the counts
    as the notice left them; what follows, the requeued allocation counting one preemption and resuming at the
    saved step, is the same code whichever way the job was requeued: ``test_a_requeue_is_a_preemption_resumed_where_it_saved``
    runs it (waiting for Slurm to start the requeued job again, and its TensorFlow, a second time proves nothing)."""
    name, ran = launch_to_be_requeued(tmp_path, launched, "sl-time")
    slurmctl.signal_batch(ran, "USR1")
    # The supervisor says REQUEUEING, every task saves (2 s in CI), then it requeues: Slurm's count is the gate.
    wait_for_condition(lambda: (job := slurmctl.job(ran)) is not None and job.restarts >= 1, timeout=120)
    # The requeued job may not start before its old credential expired (cred_expire, 30 s: .ci/slurm.sh): what the
    # first allocation's supervisor wrote last still stands.
    state = SlurmState.named(name)
    allocation, written = state.read_allocation(), state.record.read_status()
    assert allocation is not None and allocation.restarts == 0, allocation
    assert written is not None and written.message == REQUEUEING, written
    assert (written.restarts, written.preemptions) == (0, 0), written  # the requeued allocation counts it, once
    status = SlurmBackend().describe(name)
    assert status is not None and status.state is State.RESTARTING, status
    job = slurmctl.job(ran)
    assert job is not None and job.restarts == 1, job  # requeued by the supervisor, once
    assert f"warned by Slurm: requeueing job {ran}" in state.batch_log.read_text()
    saved_on_the_notice(name)
