"""``restart.expected_mtbf``: a duration in the spec, seconds in every task's run config under ``auto`` backups."""

from __future__ import annotations

from typing import Any

import pytest

from launcher.api import plan, validate_data


def planned(**restart: Any) -> Any:
    spec = validate_data({"name": "m", "roles": {"worker": {"replicas": 2}},
                          "checkpoint": {"backup_every_steps": "auto"}, "restart": restart})
    return plan(spec, backend="local").run_config


@pytest.mark.parametrize(("stated", "seconds"), [("1h30m", 5400.0), ("90s", 90.0), ("2d", 172800.0), (600, 600.0), (None, None)])
def test_a_stated_mtbf_reaches_every_task_in_seconds(stated: Any, seconds: float | None) -> None:
    assert planned(expected_mtbf=stated).expected_mtbf_seconds == seconds

