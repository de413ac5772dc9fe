"""What a real run's goodput must say about a restart, checked against its lead task's own events."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from launcher.protocol.events import Event, Restored, Step
from launcher.supervision.goodput import Goodput


def assert_restarts_accounted(goodput: Goodput | None, lead: Sequence[Event]) -> None:
    """``goodput``'s parts add up to its wall time, restarts cost time, and ``recomputed_steps`` counts the steps
    the lead task (its ``lead`` events, in order) did again: for each restore, from the step restored up to the
    highest step reached before it."""
    assert goodput is not None, "the run has no goodput"
    lost = goodput.lost_seconds.model_dump()
    assert goodput.productive_seconds + sum(lost.values()) == pytest.approx(goodput.wall_seconds, rel=0.02), goodput
    assert lost["restarts"] > 0, goodput
    again = 0
    for at, restored in ((i, e) for i, e in enumerate(lead) if isinstance(e, Restored)):
        reached = max((e.step for e in lead[:at] if isinstance(e, Step)), default=0)
        again += max(0, reached - restored.step)
    print(f"goodput: {goodput}; the lead did {again} steps again")
    assert goodput.recomputed_steps == again, (goodput, again)
    assert 0 < goodput.fraction < 1, goodput
