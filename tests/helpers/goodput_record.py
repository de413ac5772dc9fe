"""A run's goodput folded from a list, for tests: the supervisor folds its ``Ledger`` as it goes instead."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from launcher.protocol import events
from launcher.supervision.goodput import Disruption, Goodput, Ledger


class Disrupted(BaseModel):
    """The supervisor's record of a disruption at ``time`` (what ``goodput_of`` folds beside the events)."""

    model_config = ConfigDict(frozen=True)

    kind: Disruption
    time: float


def goodput_of(launched_at: float, record: Iterable[events.Event | Disrupted], lead: str, now: float,
               backup_every_steps: int | None = None) -> Goodput:
    """The goodput of a run launched at ``launched_at`` from its ``record`` in time order: its tasks' events
    (those of the task named ``lead`` lead) and the supervisor's disruptions."""
    ledger = Ledger.launched(launched_at, backup_every_steps)
    for item in record:
        if isinstance(item, Disrupted):
            ledger = ledger.disrupted(item.kind, item.time)
        else:
            ledger = ledger.event(item, from_lead=item.task == lead)
    return ledger.goodput(now)
