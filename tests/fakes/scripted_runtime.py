"""A supervisor ``Runtime`` whose tasks follow a script: no processes, no containers.

``ScriptedRuntime(exits)``: ``exits[task][run]`` is how that run of the task
ends: an exit code at once, ``(polls, code)`` after that many polls, or None
(runs until stopped); the last entry repeats. So a test states "worker 0
dies with 137 on its first run, then succeeds".
``faults`` makes ``poll`` raise ``fault`` for the given number of calls (after
``faults_after`` calls), like a Docker API error or a broken engine connection;
``stop_faults`` / ``start_faults`` / ``read_faults`` make that many calls of
``stop`` / ``start`` (of a task that ran before) / ``read_stacks`` raise it; ``unstartable`` makes ``start``
raise ``LaunchError`` for those tasks. ``adoptable`` maps a task to the run
(index into its script) a dead supervisor left in progress: ``adopt``
attaches to it, as after a ``kill -9`` of the supervisor; other tasks have
no run to adopt. ``stacks[task]`` are the lines a task writes when asked for its
stacks (``dump_stacks``); ``outside[task]`` is what ``read_stacks`` reads of it from outside
(None for others: a runtime without a reader); the dumps of the tasks in ``moving`` differ at each
request (a working program). ``clock`` is a time that ``tick`` seconds pass of at each ``poll``, for a
supervisor's stall clock. Every call is recorded (``graces``: each stop's grace seconds).
"""

from __future__ import annotations

from collections.abc import Sequence

from launcher.errors import LaunchError
from launcher.plan.planner import Task


class ScriptedRuntime:
    def __init__(
        self,
        exits: dict[str, list[int | tuple[int, int] | None]],
        *,
        output: dict[str, list[str]] | None = None,
        faults: int = 0,
        fault: Exception | None = None,
        unstartable: Sequence[str] = (),
        adoptable: dict[str, int] | None = None,
        stacks: dict[str, list[str]] | None = None,
        outside: dict[str, str] | None = None,
        moving: Sequence[str] = (),
        faults_after: int = 0,
        stop_faults: int = 0,
        start_faults: int = 0,
        read_faults: int = 0,
        tick: float = 0.0,
    ):
        self.exits = exits
        self.lines = dict(output or {})
        self.faults = faults
        self.fault = fault or ConnectionError("Connection aborted: the engine went away")
        self.unstartable = set(unstartable)
        self.adoptable = dict(adoptable or {})
        self.adopted: list[str] = []
        self.runs: dict[str, int] = {}
        self.polls: dict[str, int] = {}
        self.stopped: list[str] = []
        self.graces: list[float] = []
        self.closed = False
        self.stacks = dict(stacks or {})
        self.dumped: list[str] = []
        self.outside = dict(outside or {})
        self.read: list[str] = []
        self.moving = set(moving)
        self.faults_after = faults_after
        self.stop_faults, self.start_faults, self.read_faults = stop_faults, start_faults, read_faults
        self.tick = tick
        self.time = 0.0

    def clock(self) -> float:
        return self.time

    def _fault(self, left: str) -> None:
        """Raise ``fault`` if the counter named ``left`` is not used up (and count it)."""
        if getattr(self, left):
            setattr(self, left, getattr(self, left) - 1)
            raise self.fault

    def start(self, task: Task) -> None:
        if task.name in self.unstartable:
            raise LaunchError(f"cannot start {task.name}: no such image")
        if task.name in self.runs:  # a restart's
            self._fault("start_faults")
        self.runs[task.name] = self.runs.get(task.name, -1) + 1
        self.polls[task.name] = 0

    def adopt(self, task: Task) -> bool:
        if task.name not in self.adoptable:
            return False
        self.adopted.append(task.name)
        self.runs[task.name] = self.adoptable[task.name]
        self.polls[task.name] = 0
        return True

    def poll(self, task: Task) -> int | None:
        self.time += self.tick
        if self.faults_after:
            self.faults_after -= 1
        else:
            self._fault("faults")
        script = self.exits.get(task.name, [None])
        end = script[min(self.runs[task.name], len(script) - 1)]
        self.polls[task.name] += 1
        if isinstance(end, tuple):
            polls, code = end
            return code if self.polls[task.name] > polls else None
        return end

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None:
        self._fault("stop_faults")
        self.stopped.extend(t.name for t in tasks)
        self.graces.append(grace_seconds)

    def output(self, task: Task) -> list[str]:
        return self.lines.pop(task.name, [])

    def dump_stacks(self, task: Task) -> None:
        self.dumped.append(task.name)
        dump = self.stacks.get(task.name, [])
        if task.name in self.moving:
            dump = [*dump, f'  File "/app/train.py", line {len(self.dumped)} in step']
        self.lines.setdefault(task.name, []).extend(dump)

    def read_stacks(self, task: Task) -> str | None:
        self._fault("read_faults")
        self.read.append(task.name)
        return self.outside.get(task.name)

    def close(self) -> None:
        self.closed = True
