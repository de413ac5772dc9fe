"""Waiting on a condition the test cannot be told about: polled, with a bound so a broken test cannot hang."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for_condition(condition: Callable[[], object], timeout: float = 30) -> None:
    """Return once ``condition()`` is true; fail the test after ``timeout`` seconds."""
    ends = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < ends, "timed out"
        time.sleep(0.05)
