"""The suite's own guarantees: tests never touch a developer's real tfcluster home, unit tests never read the
clock implicitly, property tests are derandomized, and a Docker test's teardown reports what it could not remove."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import settings

from helpers.clock import LAUNCHER, ImplicitClockRead
from helpers.docker_engine import Clusters
from launcher.errors import LaunchError
from launcher.protocol import events


def test_tfcluster_home_is_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = Path(os.environ["TFCLUSTER_HOME"])
    assert home.is_relative_to(tmp_path_factory.getbasetemp())
    assert home.is_dir() and not any(home.iterdir())


def test_an_event_a_unit_test_builds_or_parses_without_its_time_fails_it() -> None:
    """helpers.clock, for every unit test: the default time would make the test's result depend on its speed."""
    with pytest.raises(ImplicitClockRead, match="tests/unit/test_test_isolation.py"):
        events.Step(step=1)
    with pytest.raises(ImplicitClockRead):
        events.EventReader(events.MANUAL_TOKEN).parse(f"TFCLUSTER_EVENT/{events.MANUAL_TOKEN} " + '{"event": "step", "task": "t", "step": 1}')
    assert events.Step(step=1, time=5.0).time == 5.0


def test_the_products_own_events_still_get_the_wall_clock() -> None:
    """A worker stamps its events itself (code in launcher/): only test code is held to explicit times."""
    product: dict[str, Any] = {}
    code = "from launcher.protocol import events\ndef build():\n    return events.Step(step=1)\n"
    exec(compile(code, str(LAUNCHER / "worker" / "stamps.py"), "exec"), product)  # as if launcher/worker wrote it
    assert product["build"]().time > 1_700_000_000  # the clock's, not an error


def test_property_tests_draw_the_same_examples_on_every_run() -> None:
    """tests/conftest.py's hypothesis profile: every property test's settings start derandomized, without a database."""
    assert settings().derandomize and settings().database is None


class _Objects:
    def __init__(self, found: dict[str, str]) -> None:
        self.found = found  # project -> the name of its object left

    def list(self, filters: dict[str, str], **_: object) -> list[Any]:
        project = filters["label"].rpartition("=")[2]
        return [SimpleNamespace(name=self.found[project])] if project in self.found else []


class _Engine:
    """The Docker client's lists ``Clusters.left`` reads: project ``left`` still has a container."""

    def __init__(self) -> None:
        self.containers, self.networks, self.volumes = _Objects({"left": "left-worker-0"}), _Objects({}), _Objects({})


class _Backend:
    """A compose backend whose removals fail as ``failures`` say."""

    def __init__(self, failures: dict[str, Exception]) -> None:
        self.client, self.failures, self.cancelled = _Engine(), failures, []

    def cancel(self, name: str, volumes: bool) -> None:
        self.cancelled.append(name)
        if name in self.failures:
            raise self.failures[name]


def test_docker_teardown_tries_every_cluster_then_fails_naming_what_it_could_not_remove(tmp_path: Path) -> None:
    backend = _Backend({"broken": RuntimeError("engine gone"), "gone": LaunchError("no cluster named 'gone'")})
    clusters = Clusters(tmp_path, backend=backend)  # type: ignore[arg-type]
    clusters.launched = ["broken", "gone", "left", "fine"]
    with pytest.raises(pytest.fail.Exception) as failed:
        clusters.down_all()
    assert backend.cancelled == ["broken", "gone", "left", "fine"]
    assert str(failed.value).splitlines()[1:] == ["broken: removing it failed: RuntimeError: engine gone",
                                                  "left: left behind: container left-worker-0"]
    clusters.launched = ["gone", "fine"]
    clusters.down_all()  # a cluster the test removed itself is no failure
