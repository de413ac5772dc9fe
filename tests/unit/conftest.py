"""What every unit test keeps to: no implicit clock read (``helpers.clock``), while its module is imported
(events built at module level) and while it runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.clock import no_implicit_clock


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Collecting a unit test module imports it: its module-level events are built then."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    with no_implicit_clock():
        return (yield)


@pytest.fixture(autouse=True)
def _no_implicit_clock() -> Iterator[None]:
    with no_implicit_clock():
        yield
