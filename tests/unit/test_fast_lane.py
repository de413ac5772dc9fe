"""The fast lane (README: ``pytest -m "not tf and not docker and not slurm and not e2e"``) needs only the ``test``
extra: with the worker extra's packages (TensorFlow, tf_keras, TensorBoard) and numpy unimportable, the whole suite
collects without an error (a module of a required group skips then, ``helpers.required.require_module``)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.paths import REPO

FAST_LANE = "not tf and not docker and not slurm and not e2e"
#: Not in the ``test`` extra: the worker extra's packages and numpy (TensorFlow's dependency).
NOT_INSTALLED = ("tensorflow", "tf_keras", "tensorboard", "numpy")

COLLECT = f"""
import sys

class NotInstalled:  # import raises ModuleNotFoundError naming the package, as when it is not installed
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {NOT_INSTALLED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, NotInstalled())
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", {FAST_LANE!r}]))
"""


def test_the_fast_lane_collects_without_the_worker_extra_or_numpy() -> None:
    environment = {name: value for name, value in os.environ.items() if name != "CI"}  # without CI: a missing part skips
    environment["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", COLLECT], cwd=REPO, env=environment, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " error" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
