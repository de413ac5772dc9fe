"""``srun`` and Slurm's control commands stood in on this host, for the Slurm runtime (``StepRuntime``) without Slurm.

``stand_in_slurm(monkeypatch, tmp_path)`` puts ``FAKE_SRUN`` first on ``PATH`` (its options dropped, the step's
command run in its place, its output where srun's would go, unlabelled) and makes ``slurmctl.steps``,
``signal_step`` and ``job`` answer for the steps it ran (each recorded by pid under its name) and for a running
allocation.
"""

from __future__ import annotations

import os
from pathlib import Path
from signal import Signals

import pytest

from launcher.backends.slurm import slurmctl

#: ``srun`` as the Slurm runtime calls it, on this host: its options are dropped and the step's command runs in its
#: place (its output goes where srun's would, unlabelled, as srun writes it without ``--label``); the pid is
#: recorded under the step's name for the stand-in of ``scancel --signal``.
FAKE_SRUN = """#!/bin/sh
for arg; do case "$arg" in --job-name=*) name="${arg#--job-name=}";; esac; done
while [ "${1#--}" != "$1" ]; do shift; done
echo $$ > "$FAKE_SLURM_STEPS/$name"
exec "$@"
"""


def stand_in_slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    steps, bin_dir = tmp_path / "steps", tmp_path / "bin"
    steps.mkdir()
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STEPS", str(steps))
    monkeypatch.setattr(slurmctl, "steps", lambda job_id: {p.name: p.name for p in steps.iterdir()})
    monkeypatch.setattr(slurmctl, "signal_step", lambda step, sig=None: os.kill(
        int((steps / step).read_text()), Signals[f"SIG{sig or 'KILL'}"]))
    monkeypatch.setattr(slurmctl, "job", lambda job_id, retries=0: slurmctl.SlurmJob("RUNNING", "", 0, "n1"))
