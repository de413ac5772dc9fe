"""Progress events of one task (``launcher.protocol.events`` lines on stdout).

Contract: ``Reporter(task).emit(kind, **fields)`` writes one event line;
``chief_only`` events are dropped on other tasks so the launcher sees each
step once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

from launcher.protocol.events import EventKind, emit


@dataclass
class Reporter:
    task: str
    is_chief: bool
    stream: TextIO = sys.stdout

    def emit(self, kind: EventKind, **fields: Any) -> None:
        emit(kind, self.task, self.stream, **fields)

    def chief(self, kind: EventKind, **fields: Any) -> None:
        if self.is_chief:
            self.emit(kind, **fields)


def scalar(value: Any) -> float | None:
    """A Python float from a tensor, numpy value or PSS RemoteValue; None when unavailable."""
    if value is None:
        return None
    if hasattr(value, "fetch"):
        value = value.fetch()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
