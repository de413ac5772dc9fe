"""The suite's own guarantees: tests never touch a developer's real tfcluster home, unit tests never read the
clock implicitly, property tests are derandomized."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from helpers.clock import LAUNCHER, ImplicitClockRead
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
        events.parse_event(events.PREFIX + '{"event": "step", "task": "t", "step": 1}')
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

