"""The ``render -d DIR`` + ``sbatch job.sbatch`` workflow on the real three-node cluster, with a task that prints.

What the tasks print (their env values included) stays their owner's also when the job was submitted by hand
from a directory tfcluster did not make private, under an open umask: ``logs/`` is ``0700``, every log ``0600``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.local_cluster import tfcluster, write_spec
from helpers.run_names import run_name
from helpers.slurm_cluster import slurm_controller  # noqa: F401
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.batch_script import SCRIPT
from launcher.backends.slurm.state import BATCH_LOG

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_controller")]


def mode(path: Path) -> str:
    return oct(path.stat().st_mode & 0o777)


def test_logs_of_a_job_submitted_by_hand_are_private(tmp_path: Path) -> None:
    printer = [sys.executable, "-c", "import os; print('token', os.environ['API_TOKEN'], flush=True)"]
    name = run_name("byhand")
    spec = write_spec(tmp_path, {"name": name, "roles": {"chief": {"command": printer}, "worker": {"command": printer}},
                                 "env": {"API_TOKEN": "s3cr3t"}})
    job_dir = tmp_path / "job"
    rendered = tfcluster("render", str(spec), "-b", "slurm", "-d", str(job_dir), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    submitted = subprocess.run(["sh", "-c", f"umask 022 && sbatch --parsable {SCRIPT}"], cwd=job_dir,
                               capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    ends = time.monotonic() + 120
    while (job := slurmctl.job(job_id)) is not None and not job.ended:
        assert time.monotonic() < ends, f"job {job_id} still {job.state}"
        time.sleep(0.5)
    status = json.loads((job_dir / "status.json").read_text())
    assert status["state"] == "succeeded", (job_dir / BATCH_LOG).read_text()
    logs = sorted((job_dir / "logs").iterdir())
    assert [p.name for p in logs] == [f"{name}-chief-0.log", f"{name}-worker-0.log"]
    assert all(p.read_text() == "token s3cr3t\n" for p in logs)
    assert {p.name: mode(p) for p in [job_dir / "logs", job_dir / BATCH_LOG, *logs]} == {
        "logs": oct(0o700), BATCH_LOG: oct(0o600), f"{name}-chief-0.log": oct(0o600), f"{name}-worker-0.log": oct(0o600)}
