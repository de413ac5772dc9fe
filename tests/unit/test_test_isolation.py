"""The suite's own guarantees: tests never touch a developer's real tfcluster home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_tfcluster_home_is_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = Path(os.environ["TFCLUSTER_HOME"])
    assert home.is_relative_to(tmp_path_factory.getbasetemp())
    assert home.is_dir() and not any(home.iterdir())
