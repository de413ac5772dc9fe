"""A run's events in its tasks' output, read as the controller reads them: with the run's token only.

``read_events(lines, token)`` keeps the lines that are events of the run of ``token``;
``run_token(backend, name)`` is the token of the run a backend's state dir records (local, compose, Slurm);
``print_event(payload)`` is Python source printing an event as a program of the user's writes it by hand
(docs/spec.md: the marker, the token from its environment, the JSON); ``print_events(*payloads)`` prints each
as the task running it, stamped with the time it prints it (what the supervisor's goodput and stall clocks read).
"""

from __future__ import annotations

from collections.abc import Iterable

from launcher.plan.targets import BackendKind
from launcher.protocol import env
from launcher.protocol.events import Event, EventReader
from launcher.supervision.harness import StateDir


def read_events(lines: Iterable[str], token: str) -> list[Event]:
    reader = EventReader(token)
    return [event for event in map(reader.parse, lines) if event is not None]


def run_token(backend: BackendKind, name: str) -> str:
    return StateDir.of(backend, name).record.read_plan().event_token


#: Python source of an event line's start: the marker and the run's token, from the task's environment.
_MARKED = f"'TFCLUSTER_EVENT/' + os.environ[{env.EVENT_TOKEN!r}] + ' '"


def print_event(payload: str) -> str:
    return f"import os; print({_MARKED} + {payload!r}, flush=True)"


def print_events(*payloads: dict[str, object]) -> str:
    stamped = f"'task': os.environ[{env.TASK_NAME!r}], 'time': time.time()"
    return "import json, os, time\n" + "\n".join(
        f"print({_MARKED} + json.dumps({{**{payload!r}, {stamped}}}), flush=True)" for payload in payloads)
