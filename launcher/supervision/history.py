"""A run's history, as ``tfcluster report`` draws it: its plan, its status document and every task's events.

Contract: ``RunHistory.read(plan, status, lines)`` reads each task's output (``lines(task)``: the task's log
across its runs, as ``logs NAME TASK`` prints it) with the plan's token only (``EventReader``: no other
run's or program's line counts); a task whose log cannot be read (``LaunchError``) has no events.
``status`` is the ``status -o json`` document (``JobStatus.to_dict``), kept as data, so keys added to it
(``goodput``) reach the report without this model changing. Events keep the order each task wrote them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.protocol.events import Event, EventReader


class RunHistory(BaseModel):
    model_config = ConfigDict(frozen=True)

    plan: Plan
    #: The ``status -o json`` document.
    status: dict[str, Any]
    #: Each task's events, by task name, in the order the task wrote them.
    events: dict[str, list[Event]]

    @classmethod
    def read(cls, plan: Plan, status: dict[str, Any], lines: Callable[[str], Iterable[str]]) -> RunHistory:
        reader = EventReader(plan.event_token)
        events: dict[str, list[Event]] = {}
        for task in plan.tasks:
            try:
                found = [event for event in map(reader.parse, lines(task.name)) if event is not None]
            except LaunchError:
                found = []  # its log is gone (a removed container): the report shows the task without events
            events[task.name] = found
        return cls(plan=plan, status=status, events=events)
