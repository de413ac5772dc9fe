"""Task logs kept as one file per task (local, Slurm): what ``logs`` prints, and the rule their tasks share.

Contract: ``follow(plan, task, log_path, running)`` yields the lines of one
task's log (``task``), or of every task prefixed ``"<task> | "`` (None), then,
while ``running()`` is true, the lines appended since, polling every
``FOLLOW_POLL_SECONDS``; an unknown task raises ``LaunchError``.
``command_problems(spec)``: tasks that are processes need a command (an
empty role ``command``, the image's own, exists only in containers).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from launcher.backends.lines import LineReader
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem

FOLLOW_POLL_SECONDS = 0.3


def follow(plan: Plan, task: str | None, log_path: Callable[[str], Path], running: Callable[[], bool]) -> Iterator[str]:
    if task is not None:
        try:
            plan.task(task)
        except KeyError as exc:
            raise LaunchError(exc.args[0]) from None
    names = [task] if task is not None else [t.name for t in plan.tasks]
    readers = {n: LineReader(log_path(n)) for n in names}
    while True:
        more = running()
        for n, reader in readers.items():
            for line in reader.read(final=not more):
                yield line if task is not None else f"{n} | {line}"
        if not more:
            return
        time.sleep(FOLLOW_POLL_SECONDS)


def command_problems(spec: ClusterSpec) -> list[Problem]:
    return [
        Problem(f"roles.{role.value}.command", "is empty: the image's own command runs only in containers "
                                               "(-b compose or -b k8s); give the command to run")
        for role in RoleType if spec.roles.replicas(role) and spec.roles.role(role).command == []
    ]
