"""What the shared entrypoint needs besides TF_CONFIG: the job settings, as JSON in one env var.

Contract: every task's environment holds ``TFCLUSTER_JOB`` = ``RunConfig``
JSON, identical for all tasks of a cluster. The controller writes it; the
entrypoint (``launcher.worker``) reads it with ``RunConfig.from_env``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from launcher.protocol import env
from launcher.spec.models import Collective, Strategy, TPUSpec, TrainingSpec


class RunConfig(BaseModel):
    """Job-wide settings for the entrypoint.

    ``strategy`` is already resolved: ``auto`` here means a single task that
    picks mirrored / one_device / default from its own devices.
    ``backup_every_steps`` None means BackupAndRestore once per epoch;
    ``expected_mtbf_seconds``: the spec's ``restart.expected_mtbf`` (under ``backup_every_steps: auto`` only);
    ``async_backups``: backups are written in a background thread (``launcher.worker.backups``).
    ``tensorboard_dir`` is the resolved log dir (None: no summaries), written
    every ``summary_every_steps`` steps by the chief.
    ``run_id`` identifies one launch; the completion marker carries it so a
    marker left by an earlier run is never taken for this one's.
    ``lead_runs_entrypoint``: the job's lead task runs the built-in entrypoint,
    so its progress counts ``training.epochs`` of ``training.steps_per_epoch``
    from the start (``launcher.protocol.job_progress.seed``); else the program
    reports its own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    run_id: str
    strategy: Strategy
    collective: Collective = Collective.AUTO
    training: TrainingSpec = TrainingSpec()
    checkpoint_dir: str
    backup_every_steps: int | Literal["auto"] | None = None
    async_backups: bool = False
    expected_mtbf_seconds: float | None = None
    tpu: TPUSpec | None = None
    tensorboard_dir: str | None = None
    summary_every_steps: int = 10
    lead_runs_entrypoint: bool = True

    def to_env(self) -> dict[str, str]:
        return {env.JOB: self.model_dump_json(exclude_none=True)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> RunConfig:
        try:
            raw = environ[env.JOB]
        except KeyError:
            raise RuntimeError(f"{env.JOB} is not set: start tasks with tfcluster, or set it by hand") from None
        return cls.model_validate_json(raw)
