"""Each task's run as the supervisor sees it, and the reading of its output: what a task's lines mean.

Contract: ``TaskRuns(plan, runtime, on_event)`` holds one ``TaskRun`` per task of the plan, in plan order, and
is the supervisor's only caller of the runtime's ``start``, ``poll``, ``stop`` and ``output``. ``start`` begins
fresh runs; ``poll`` reads every running task's new output and returns the runs that ended, in plan order
(an ``OomReports`` runtime asked about each non-zero end); ``stop`` stops runs and reads them to their end;
``read`` takes one batch of a run's output (batch after batch to its end once the run ended). A line of a stack
dump is kept for the run (up to ``MAX_STACK_BYTES``); an event (under the plan's token only) updates the run
(its ``failed`` reason, its message, its stack handler, its step time) and is handed to ``on_event``; any
other line is the run's tail (its last ``LOG_TAIL_LINES``, each cut to the ``LOG_LINE_CHARS`` a log pattern
reads) and, unless noise, its last error (``LAST_ERROR_CHARS``) and its status's last line (``LAST_LINE_CHARS``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from launcher.plan.planner import Plan, Task
from launcher.plan.policy import LOG_LINE_CHARS
from launcher.protocol import events
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.spec.models import LOG_TAIL_LINES
from launcher.supervision.noise import is_noise
from launcher.supervision.runtime import OomReports, Runtime, StartsTogether
from launcher.supervision.stack_dumps import is_stack_line
from launcher.supervision.status import State, TaskStatus, clipped
from launcher.supervision.stragglers import StepBreakdown

#: How much of a task's last output line its status keeps.
LAST_LINE_CHARS = 200
#: How much of a task's last error line (or of its ``failed`` event's reason) the supervisor keeps for its messages.
LAST_ERROR_CHARS = 1000


@dataclass
class TaskRun:
    """Supervision state of one task."""

    task: Task
    status: TaskStatus
    running: bool = False
    last_error: str = ""
    failed_reason: str = ""
    #: The run dumps its stacks on ``STACKS_SIGNAL`` (it said so); the lines of its current dump, and their size
    #: (lines past ``MAX_STACK_BYTES`` are dropped).
    dumps_stacks: bool = False
    stack_lines: list[str] = field(default_factory=list)
    stack_bytes: int = 0
    #: The current run's last output lines (events and stack dumps left out), for the failure rules.
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    #: The current run ended by the kernel's OOM killer (an ``OomReports`` runtime said so).
    oom_killed: bool = False

    def error(self) -> str:
        return self.failed_reason or self.last_error or "(no output)"


class TaskRuns:
    """Every task's ``TaskRun`` (see the module contract)."""

    def __init__(self, plan: Plan, runtime: Runtime, on_event: Callable[[TaskRun, events.Event], None]):
        self.runtime = runtime
        self.runs = {t.name: TaskRun(t, TaskStatus(t.name, State.PENDING)) for t in plan.tasks}
        self._on_event = on_event
        self._events = events.EventReader(plan.event_token)

    @property
    def reads_events(self) -> bool:
        """Whether events can be read at all (the plan has a token)."""
        return self._events.reads

    def __getitem__(self, name: str) -> TaskRun:
        return self.runs[name]

    def running(self) -> list[TaskRun]:
        return [run for run in self.runs.values() if run.running]

    def exited(self) -> dict[str, int]:
        """The exit code of every task whose current run ended."""
        return {name: run.status.exit_code for name, run in self.runs.items()
                if not run.running and run.status.exit_code is not None}

    def start(self, runs: Iterable[TaskRun]) -> None:
        """Start each of ``runs``: all at once on a ``StartsTogether`` runtime (each then taken as running, also
        where the first failure is raised: a run not started is stopped as a no-op), else one after another (a
        failure raised before the next one starts)."""
        runs = list(runs)
        if isinstance(self.runtime, StartsTogether) and len(runs) > 1:
            try:
                self.runtime.start_together([run.task for run in runs])
            finally:
                for run in runs:
                    self._began(run)
            return
        for run in runs:
            self.runtime.start(run.task)
            self._began(run)

    @staticmethod
    def _began(run: TaskRun) -> None:
        """``run``'s task started: a fresh run of it."""
        run.running = True
        run.dumps_stacks = False
        run.failed_reason = run.last_error = ""
        run.tail.clear()
        run.oom_killed = False
        run.status.state = State.RUNNING
        run.status.exit_code = None
        run.status.message = ""

    def poll(self) -> list[tuple[str, int]]:
        ended = []
        for name, run in self.runs.items():
            if not run.running:
                continue
            code = self.runtime.poll(run.task)
            self.read(run, to_the_end=code is not None)
            if code is not None:
                run.running = False
                run.status.exit_code = code
                run.status.state = State.of_exit(code)
                run.oom_killed = code != 0 and isinstance(self.runtime, OomReports) and self.runtime.oom_killed(run.task)
                ended.append((name, code))
        return ended

    def stop(self, runs: Iterable[TaskRun], message: str, grace_seconds: float) -> None:
        runs = list(runs)
        if not runs:
            return
        self.runtime.stop([r.task for r in runs], grace_seconds)
        for run in runs:
            self.read(run, to_the_end=True)
            run.running = False
            run.status.state = State.CANCELLED
            run.status.message = message

    def read(self, run: TaskRun, to_the_end: bool = False) -> None:
        while True:
            lines = self.runtime.output(run.task)
            for line in lines:
                self._take(run, line)
            if not (to_the_end and lines):
                return

    def _take(self, run: TaskRun, line: str) -> None:
        if is_stack_line(line):
            if run.stack_bytes < MAX_STACK_BYTES:
                run.stack_lines.append(line.rstrip())
                run.stack_bytes += len(line.encode(errors="replace"))
            return
        if not self._events.carries_event(line):
            if line.strip():
                run.tail.append(line.rstrip()[:LOG_LINE_CHARS])
            if line.strip() and not is_noise(line):
                run.last_error = clipped(line.strip(), LAST_ERROR_CHARS)
                run.status.last_line = run.last_error[:LAST_LINE_CHARS]
            return
        event = self._events.parse(line)
        if event is None:
            return
        if isinstance(event, events.Failed):
            run.failed_reason = clipped(event.reason, LAST_ERROR_CHARS)
        elif isinstance(event, events.Preempted):
            run.status.message = f"preempted, saved at step {event.step}" if event.step else "preempted"
        elif isinstance(event, events.Restored):
            run.status.message = f"restored at epoch {event.epoch} step {event.step}"
        elif isinstance(event, events.StacksOnSignal):
            run.dumps_stacks = True
        elif isinstance(event, events.WarmStart):
            run.status.message = f"started in its standby (TensorFlow imported {event.import_seconds:.1f} s ahead)"
        elif isinstance(event, events.StepTime) and run.task.type.trains:
            run.status.step_time = StepBreakdown.of(event)
        self._on_event(run, event)

