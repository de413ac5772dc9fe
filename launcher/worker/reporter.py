"""Progress events of one task (``launcher.protocol.events`` lines on stdout).

Contract: ``Reporter(task, is_lead).emit(event)`` writes one event line, with the
run's token (``token``: the task's ``TFCLUSTER_EVENT_TOKEN`` unless given);
``lead(event)`` writes it only on the job's lead task (the chief, or worker 0
without one), so the launcher sees each step once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from launcher.protocol.events import Event, emit, task_token


@dataclass
class Reporter:
    task: str
    is_lead: bool
    stream: TextIO = sys.stdout
    token: str = field(default_factory=task_token)

    def emit(self, event: Event) -> None:
        emit(event, self.task, self.stream, self.token)

    def lead(self, event: Event) -> None:
        if self.is_lead:
            self.emit(event)


def scalar(value: Any) -> float | None:
    """A Python float from a local tensor or numpy value (``callbacks.fetched`` brings PSS values here); None when unavailable."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
