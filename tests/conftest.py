"""Shared fixtures: spec builders and a CLI runner. TF-heavy fixtures live in their own modules."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import settings

from helpers.paths import REPO  # noqa: I001

EXAMPLES = REPO / "examples"
# the suite's own hooks are tested on tiny trees (tests/unit/test_required_groups.py, test_k8s_start.py, test_lanes.py):
# the lanes of two processes and their order (helpers.lanes), the e2e tests on the real cluster of helpers.k8s_start
pytest_plugins = ("pytester", "helpers.lanes", "helpers.k8s_start")

# Property tests draw the same examples on every run, with no example database carried between runs: a red
# run is the same red when run again, and a green one does not turn red by a new draw. A test's own settings
# (max_examples, deadline) keep these unless they say otherwise.
settings.register_profile("tfcluster", derandomize=True, database=None)
settings.load_profile("tfcluster")

# A harness may start pytest with SIGINT ignored (a background job of a non-interactive shell is) or SIGHUP ignored
# (under nohup), and an ignored signal stays ignored in every child: the Ctrl-C and closed-terminal tests would then
# find `up`, `status` and `tensorboard` deaf to it, as they are for a user who ran them under nohup. The tests are
# of a terminal's Ctrl-C and hang-up, so they get them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_configure(config: pytest.Config) -> None:
    from helpers.required import count_groups  # here: it imports helpers.lanes, which pytest_plugins imports first

    count_groups(config)  # under CI: each group's count at the end, and a required group that ran none fails the run


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own temporary TFCLUSTER_HOME, whatever the developer exported: tests never write
    into a real home, and registries and local state never leak between tests. A developer's
    TFCLUSTER_REGISTRY (the default of `--registry`) is not seen either."""
    monkeypatch.setenv("TFCLUSTER_HOME", str(tmp_path_factory.mktemp("tfcluster-home")))
    monkeypatch.delenv("TFCLUSTER_REGISTRY", raising=False)  # `--registry`'s default, exported by .ci/k8s.sh


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner()


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a spec (dict or YAML text) to a file and return its path."""

    def write(spec: dict | str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
        return path

    return write
