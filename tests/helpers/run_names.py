"""The names of the runs the tests create on a shared engine (Docker, Slurm, a Kubernetes namespace, this host's
processes: the local tests find a run's tasks by name in every process's environment, ``helpers.local_cluster``).

Contract: ``run_name(base)`` is ``<base>-<SESSION_SUFFIX>``, the suffix made once per test session (process), so
two sessions (two CI jobs, two developers) on one daemon never share a run name, and a test's teardown (which
removes runs by name) removes only what its own session created. ``base`` must be a DNS-1123 label (the spec's
``name`` rule); the result stays one: lowercase letters, digits and dashes (a Compose project name, a Kubernetes
label, a Slurm job name).
"""

from __future__ import annotations

import secrets

#: Made once per session (process): every run name of this session ends with it.
SESSION_SUFFIX = secrets.token_hex(3)


def run_name(base: str) -> str:
    """``base`` made unique to this session (``<base>-<SESSION_SUFFIX>``): the name of a run the tests create."""
    return f"{base}-{SESSION_SUFFIX}"
