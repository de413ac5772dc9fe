"""The Slurm backend: one allocation per job, its tasks as ``srun`` steps supervised inside it."""

from __future__ import annotations
