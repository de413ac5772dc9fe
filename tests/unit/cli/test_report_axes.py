"""The report's charts stay bounded whatever a program reported (``launcher.cli.report.axes``): losses a few
femto apart, a rate over no time, values at the float's limits. Each case renders the whole page under a time
limit and a memory bound (two losses near 1e-15 once made the tick loop allocate hundreds of megabytes)."""

from __future__ import annotations

import math
import sys
import tracemalloc
from collections.abc import Callable

import pytest

from launcher import api
from launcher.cli.report.axes import Axis, finite
from launcher.cli.report.page import render
from launcher.protocol import events
from launcher.protocol.events import MAX_COUNT, MAX_TIME
from launcher.supervision.history import RunHistory
from tests.unit.cli.test_report import Elements

PLAN = api.plan(api.validate_data({"name": "job", "roles": {"worker": {}}}))
LEAD = PLAN.lead().name
#: What one page may allocate at its peak, however its numbers run.
PAGE_BYTES = 8 * 2**20


def page_of(lead: list[events.Event]) -> str:
    return render(RunHistory(plan=PLAN, status={"state": "succeeded", "tasks": []}, events={LEAD: lead}))


def bounded(make: Callable[[], str]) -> str:
    tracemalloc.start()
    try:
        made = make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PAGE_BYTES
    return made


def steps(*points: tuple[float, int, float | None]) -> list[events.Event]:
    return [events.Step(time=time, step=step, loss=loss) for time, step, loss in points]


CASES = {
    "two losses near 1e-15": steps((10, 1, 1.1e-15), (20, 2, 1.2e-15)),
    "a loss span below the smallest normal float": steps((10, 1, 5e-324), (20, 2, 1e-323)),
    "losses at both ends of the floats": steps((10, 1, -1.7e308), (20, 2, 1.7e308)),
    "losses too large for their difference to round": steps((10, 1, 1e16), (20, 2, 1e16 + 2)),
    "a rate over no time (infinite)": steps((0.0, 1, 0.5), (5e-324, 2, 0.4)),
    "steps and times at their bounds": steps((0.0, 0, 1.0), (MAX_TIME, MAX_COUNT, 2.0)),
    "a single point": steps((10, 1, 0.0)),
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("lead", CASES.values(), ids=CASES.keys())
def test_the_page_of_any_reported_numbers_is_bounded(lead: list[events.Event]) -> None:
    found = Elements(bounded(lambda: page_of(lead)))
    assert len(found.classed("loss-point")) == len(lead)
    assert len(found.tags) < 200


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("low", "high"), [
    (0.0, 1e-15), (0.0, 5e-324), (0.0, sys.float_info.min), (-1e308, 1e308), (0.0, sys.float_info.max),
    (1e16, 1e16 + 2), (1e300, 1e300 * (1 + 1e-15)), (3.0, 3.0 + 4e-16), (-5.0, -5.0 + 1e-15), (0.0, 55.0),
])
@pytest.mark.parametrize("count", [4, 6])
def test_ticks_are_few_within_the_axis_whatever_its_span(low: float, high: float, count: int) -> None:
    axis = Axis.of([low, high])
    ticks = axis.ticks(count)
    assert 1 <= len(ticks) <= 2 * count + 1
    assert all(math.isfinite(tick) and -1e-9 <= axis.fraction(tick) <= 1 + 1e-9 for tick in ticks)


def test_round_ticks_for_ordinary_spans() -> None:
    assert Axis(0.0, 100.0).ticks(4) == [0.0, 50.0, 100.0]
    assert Axis(0.0, 55.0).ticks(6) == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert Axis(0.0, 1e-15).ticks(4) == [0.0, 5e-16, 1e-15]


def test_an_axis_always_has_a_span_and_places_its_ends() -> None:
    for value in (0.0, 3.0, -2.0, 1e308, -1e308, 1e16):
        axis = Axis.of([value])
        assert axis.low < axis.high and math.isfinite(axis.low) and math.isfinite(axis.high)
        assert {axis.fraction(axis.low), axis.fraction(axis.high)} == {0.0, 1.0}
    wide = Axis.of([-1.7e308, 1.7e308])
    assert (wide.fraction(-1.7e308), wide.fraction(0.0), wide.fraction(1.7e308)) == (0.0, 0.5, 1.0)
    assert Axis.of([2.0, 5.0], floor=0.0) == Axis(0.0, 5.0) and Axis.of([-3.0, -1.0], floor=0.0) == Axis(-3.0, -1.0)


def test_points_that_are_not_finite_are_not_placed() -> None:
    inf, nan = math.inf, math.nan
    assert finite([(1.0, 2.0), (inf, 1.0), (1.0, nan), (2.0, -inf), (3.0, 4.0)]) == [(1.0, 2.0), (3.0, 4.0)]
