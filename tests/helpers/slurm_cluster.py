"""Helpers for ``@pytest.mark.slurm`` tests: a real Slurm controller, the CLI, the tasks' processes.

Contract: the ``slurm_controller`` fixture FAILS when env ``CI`` is set and no
Slurm controller answers (``.ci/slurm.sh`` starts one there), and skips
with the reason elsewhere. ``wait_status`` polls ``SlurmBackend.describe``
(bounded, on a condition); ``task_processes(name)`` are the pids on this host
whose environment names a task of cluster ``name`` (all three nodes are this
host); ``assert_nothing_left`` checks that Slurm forgot the job or ended it
and that no such process is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.required import unavailable
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.plan.targets import STANDBY_MODULE
from launcher.protocol import env
from launcher.supervision.status import JobStatus


@pytest.fixture(scope="session")
def slurm_controller() -> None:
    if shutil.which("sinfo") is None:
        unavailable("Slurm's client commands are not installed (.ci/slurm.sh installs and starts a cluster)", "slurm")
    done = subprocess.run(["sinfo", "-h", "-o", "%D %t"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        unavailable(f"no Slurm controller answers: {done.stderr.strip()}", "slurm")
    if not done.stdout.strip():
        unavailable("the Slurm controller has no nodes", "slurm")


def wait_status(name: str, done: Callable[[JobStatus], bool], timeout: float) -> JobStatus:
    ends = time.monotonic() + timeout
    while True:
        status = SlurmBackend().describe(name)
        if status is not None and done(status):
            return status
        assert status is None or not status.state.terminal, f"ended before expected: {status}"
        assert time.monotonic() < ends, f"timed out; last status: {status}"
        time.sleep(0.5)


def task_processes(name: str) -> list[int]:
    """Pids on this host (every node of the test cluster) running a task of cluster ``name``."""
    prefix = f"{env.TASK_NAME}={name}-".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(v.startswith(prefix) for v in environ):
            found.append(int(proc.name))
    return found


def task_process(name: str, task: str) -> int:
    """The task's training process (python) of its first run, not srun, its shell or its standby (which becomes
    the task at a restart: then ``slurmctl.steps`` tells its step)."""
    marker = f"{env.TASK_NAME}={task}".encode()
    for pid in task_processes(name):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (marker in environ and os.path.basename(argv[0]).startswith(b"python")
                and STANDBY_MODULE.encode() not in argv):
            return pid
    raise AssertionError(f"no process of {task}")


def assert_nothing_left(name: str, job_id: str | None) -> None:
    ends = time.monotonic() + 60
    while time.monotonic() < ends:
        job = slurmctl.job(job_id) if job_id else None
        if (job is None or job.ended) and not task_processes(name):
            return
        time.sleep(0.5)
    job = slurmctl.job(job_id) if job_id else None
    assert job is None or job.ended, f"Slurm job {job_id} is still {job}"
    assert not task_processes(name), f"processes of {name} left: {task_processes(name)}"


def job_id(name: str) -> str | None:
    return SlurmState.named(name).read_job_id()
