"""The files of one Slurm job: the supervisor's ``StateDir`` on the shared filesystem, plus Slurm's part.

Contract: the directory is ``naming.state_dir("slurm", NAME)`` (under
``$TFCLUSTER_HOME``, default ``~/.tfcluster``, which must be on the
filesystem the nodes share, as home directories on Slurm clusters are). It is
also the job's submit directory: ``job.sbatch`` and ``plan.json``
(``launcher.backends.slurm.batch_script``), ``batch.log`` (the batch step's output),
``job_id`` (written by ``submit``), ``allocation.json`` (written by each
allocation's supervisor before its first status: the Slurm restart count it
runs under and its nodes, so a status left by an earlier allocation is known
as such), ``port_secret`` (the job's secret offset of its port block, drawn by
its first allocation's supervisor, owner-only, kept across requeues:
``launcher.backends.slurm.placement``), ``status.json`` and
``logs/<task>.log`` (every run of a task).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from pydantic import BaseModel

from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.statefile import read_json, write_json, write_private

#: The batch step's output (the supervisor's own lines), in the job's directory: ``sbatch --output``.
BATCH_LOG = "batch.log"


class Allocation(BaseModel):
    """The allocation a supervisor runs in: Slurm's job id, its restart count, its nodes (name -> address)."""

    job_id: str
    restarts: int
    nodes: dict[str, str]


class SlurmState(StateDir):
    def __init__(self, root: Path):
        super().__init__(root)
        self.logs = root / "logs"
        self.batch_log = root / BATCH_LOG
        self.job_id = root / "job_id"
        self.allocation = root / "allocation.json"
        self.secret = root / "port_secret"

    @classmethod
    def named(cls, name: str) -> SlurmState:
        return cls(StateDir.of(BackendKind.SLURM, name).root)

    def task_log(self, task: str) -> Path:
        return self.logs / f"{task}.log"

    def read_job_id(self) -> str | None:
        try:
            return self.job_id.read_text().strip() or None
        except OSError:
            return None

    def read_allocation(self) -> Allocation | None:
        data = read_json(self.allocation)
        return None if data is None else Allocation.model_validate(data)

    def write_allocation(self, allocation: Allocation) -> None:
        write_json(self.allocation, allocation.model_dump())

    def port_secret(self) -> int:
        """The job's port secret: the one kept here, else a new random one, kept (owner-only)."""
        try:
            return int(self.secret.read_text())
        except (OSError, ValueError):
            drawn = secrets.randbits(63)
            write_private(self.secret, str(drawn))
            return drawn
