"""Faults of a Slurm job on the real three-node cluster, with tasks that only sleep (no TensorFlow needed).

A node lost (``scontrol update nodename=n2 state=down``), the batch step (the
supervisor) killed, one step ``scancel``ed: each ends in a true status within
a bounded time, and ``down`` leaves no job in the queue and no task process.
A requeued job starts again once Slurm's hold on it has passed (``cred_expire`` + 1 s: 31 s on the test
cluster; an administrator's ``scontrol update StartTime=now`` before that may find the job's credential still revoked
and kill it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.local_cluster import tfcluster, write_spec
from helpers.run_names import run_name
from helpers.slurm_cluster import (  # noqa: F401
    assert_nothing_left,
    job_id,
    slurm_controller,
    task_processes,
    wait_status,
)
from launcher.backends import supervisor_process
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.plan.targets import BackendKind
from launcher.supervision.status import JobStatus, State, SupervisorState

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_controller")]

SLEEPER = {"command": ["python", "-c", "import time; time.sleep(600)"],
           "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}}, "checkpoint": {"save_grace_seconds": 5}}


@pytest.fixture
def sleeper(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A running job of three sleeping tasks (one per node), taken down afterwards."""
    name = run_name(f"sl-{request.node.name.removeprefix('test_')[:20].rstrip('_').replace('_', '-')}")
    result = tfcluster("up", "-b", "slurm", "-d", str(write_spec(tmp_path, {"name": name, **SLEEPER})), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ran = job_id(name)
    wait_status(name, lambda s: s.state is State.RUNNING and len(task_processes(name)) >= 6, timeout=60)  # srun + task
    yield name
    state = SlurmState.named(name)
    if state.exists():
        # the supervisors' own account, shown with a failure (pytest's captured teardown output): down removes it
        print(state.batch_log.read_text(errors="replace")[-6000:] if state.batch_log.exists() else "no batch.log")
        assert tfcluster("down", name, cwd=tmp_path, timeout=180).returncode == 0
    assert_nothing_left(name, ran)


def test_a_lost_node_requeues_the_job_which_resumes_as_a_preemption(sleeper: str) -> None:
    try:
        slurmctl.run(["scontrol", "update", "nodename=n2", "state=down", "reason=tfcluster-test"])
        status = wait_status(sleeper, lambda s: s.state is State.RESTARTING, timeout=60)
        assert "requeued" in status.message, status
    finally:  # slurmd still answers, so the node may be back already (ReturnToService=2): no error then
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"], capture_output=True, timeout=30)
    status = wait_status(sleeper, lambda s: s.state is State.RUNNING and s.preemptions == 1, timeout=180)
    assert status.restarts == 0 and status.supervisor is SupervisorState.ALIVE, status


def test_a_killed_batch_step_ends_the_job_failed_not_running(sleeper: str) -> None:
    state = SlurmState.named(sleeper)
    [supervisor] = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                    if _cmdline(pid).endswith(f"{' '.join(supervisor_process.command(BackendKind.SLURM)[1:])} {state.root}")]
    os.kill(supervisor, signal.SIGKILL)
    ends = time.monotonic() + 90
    while not (status := _describe(sleeper)).state.terminal:
        assert time.monotonic() < ends, status
        time.sleep(0.5)
    assert status.state is State.FAILED and status.supervisor is SupervisorState.LOST, status
    assert "supervisor did not finish" in status.message and all(t.state.terminal for t in status.tasks), status
    assert_nothing_left(sleeper, job_id(sleeper))


def test_scancel_of_one_step_restarts_the_group(sleeper: str) -> None:
    steps = slurmctl.steps(str(job_id(sleeper)))
    slurmctl.run(["scancel", steps[f"{sleeper}-worker-1"]])
    status = wait_status(sleeper, lambda s: s.restarts == 1 and s.state is State.RUNNING, timeout=60)
    assert all(t.restarts == 1 for t in status.tasks) and status.preemptions == 0, status


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _describe(name: str) -> JobStatus:
    status = SlurmBackend().describe(name)
    assert status is not None
    return status
