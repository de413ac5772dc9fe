"""What the shared entrypoint needs besides TF_CONFIG: the job settings, as JSON in one env var.

Contract: every task's environment holds ``TFCLUSTER_JOB`` = ``RunConfig``
JSON, identical for all tasks of a cluster. The controller writes it; the
entrypoint (``launcher.worker``) reads it with ``RunConfig.from_env``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from launcher.spec import Collective, Strategy, TPUSpec, TrainingSpec

JOB_ENV = "TFCLUSTER_JOB"
TASK_NAME_ENV = "TFCLUSTER_TASK_NAME"

#: Environment every task gets, on every backend, before anything else runs.
BASE_TASK_ENV = {
    "TF_USE_LEGACY_KERAS": "1",  # Keras 3 cannot fit() under MWMS or PSS; tf_keras can.
    "GRPC_FAIL_FAST": "use_caller",  # PSS: fail RPCs to dead peers fast so the coordinator reacts.
    "PYTHONUNBUFFERED": "1",  # progress events reach the launcher as they happen.
}


class RunConfig(BaseModel):
    """Job-wide settings for the entrypoint.

    ``strategy`` is already resolved: ``auto`` here means a single task that
    picks mirrored / one_device / default from its own devices.
    ``backup_every_steps`` None means BackupAndRestore once per epoch.
    ``run_id`` identifies one launch; the completion marker carries it so a
    marker left by an earlier run is never taken for this one's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    run_id: str
    strategy: Strategy
    collective: Collective = Collective.AUTO
    training: TrainingSpec = TrainingSpec()
    checkpoint_dir: str
    backup_every_steps: int | None = None
    tpu: TPUSpec | None = None

    def to_env(self) -> dict[str, str]:
        return {JOB_ENV: self.model_dump_json(exclude_none=True)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "RunConfig":
        try:
            raw = environ[JOB_ENV]
        except KeyError:
            raise RuntimeError(f"{JOB_ENV} is not set: start tasks with tfcluster, or set it by hand") from None
        return cls.model_validate_json(raw)
