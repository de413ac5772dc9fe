"""Stacks of every task, now, on request (``tfcluster debug``), through a backend's ``Runtime``.

Contract: ``stacks_now(runtime, plan)`` attaches to each task's current run
(``Runtime.adopt``: output from the run's start, which says whether the task
dumps its stacks on ``STACKS_SIGNAL``: its ``stacks_on_signal`` event, read with the
plan's token only), asks those that do for their stacks,
reads those of the others from outside (``Runtime.read_stacks``: py-spy on
local and compose; on Kubernetes every task's, ``ReadsEveryStack``), and returns ``{task: dump}`` for every task that runs: None when it
gave none within ``seconds`` or they cannot be read (no handler, which
``launcher.progress`` or the entrypoint install, and no reader). It
never stops, starts or records anything: a supervisor may run meanwhile.
"""

from __future__ import annotations

import time

from launcher.plan.planner import Plan
from launcher.protocol.events import EventReader, StacksOnSignal
from launcher.protocol.stacks_signal import capped
from launcher.supervision.runtime import Runtime, signalled
from launcher.supervision.stack_dumps import is_stack_line
from launcher.supervision.stall_watch import STACKS_SECONDS

POLL_SECONDS = 0.2


def stacks_now(runtime: Runtime, plan: Plan, seconds: float = STACKS_SECONDS) -> dict[str, str | None]:
    reader = EventReader(plan.event_token)
    running = [task for task in plan.tasks if runtime.adopt(task) and runtime.poll(task) is None]
    asked = [task for task in running
             if signalled(runtime, any(isinstance(reader.parse(line), StacksOnSignal) for line in runtime.output(task)))]
    lines: dict[str, list[str]] = {task.name: [] for task in asked}
    for task in asked:
        runtime.dump_stacks(task)
    read = {task.name: runtime.read_stacks(task) for task in running if task not in asked}
    ends = time.monotonic() + seconds
    while asked and time.monotonic() < ends:
        before = sum(map(len, lines.values()))
        time.sleep(POLL_SECONDS)
        for task in asked:
            lines[task.name] += [line.rstrip() for line in runtime.output(task) if is_stack_line(line)]
        if all(lines.values()) and sum(map(len, lines.values())) == before:
            break
    return {task.name: read[task.name] if task.name in read else capped("\n".join(lines.get(task.name, []))) or None
            for task in running}

