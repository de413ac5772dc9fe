"""What CI installs is required there: a test that needs it fails under CI and skips elsewhere."""

from __future__ import annotations

import os

import pytest


def unavailable(reason: str) -> None:
    """Fail under CI (``.ci/run`` installs Docker, Slurm and the host's libraries), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {reason}", pytrace=False)
    pytest.skip(reason)
