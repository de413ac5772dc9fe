"""What a real run's goodput must say about a restart, checked against its lead task's own events."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from launcher.protocol.events import Event, Restored, Step
from launcher.supervision.goodput import Goodput


def assert_restarts_accounted(goodput: Goodput | None, lead: Sequence[Event], stopped_at: int,
                              backup_every: int) -> None:
    """``goodput``'s parts add up to its wall time, restarts cost time, and ``recomputed_steps`` is exactly the
    steps done again: the caller stopped the run at step ``stopped_at`` (past a backup: backups every
    ``backup_every`` steps), which the lead reported last before the restart (``lead``: its events, in order); the
    next run restored the backup before it and did the steps from there to ``stopped_at`` again."""
    assert goodput is not None, "the run has no goodput"
    lost = goodput.lost_seconds.model_dump()
    assert goodput.productive_seconds + sum(lost.values()) == pytest.approx(goodput.wall_seconds, rel=0.02), goodput
    assert lost["restarts"] > 0, goodput
    [restored] = [e for e in lead if isinstance(e, Restored)]
    reached = max(e.step for e in lead[: lead.index(restored)] if isinstance(e, Step))
    backup = stopped_at // backup_every * backup_every
    print(f"goodput: {goodput}; the lead reached step {reached}, restored step {restored.step}")
    assert stopped_at > backup, f"stopped at step {stopped_at}, a backup: no step done again to count"
    assert (reached, restored.step) == (stopped_at, backup), (reached, restored)
    assert goodput.recomputed_steps == stopped_at - backup, goodput
    assert 0 < goodput.fraction < 1, goodput
