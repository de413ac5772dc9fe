"""The stall watchdog at work: it keeps the job's stall clock, reads the stacks of a suspected stall, and says
when the job stalled.

Contract: ``StallWatch`` folds the lead's events (``event``) and the training group's starts (``started``) into
the ``StallClock`` (``launcher.supervision.stall``: the policy). ``check(decide)``, once a poll round, judges it;
on a suspected stall it takes two samples of every running task's stacks ``Tuning.stack_gap`` apart, asked
(``dump_stacks``, waiting up to ``STACKS_SECONDS`` for the dumps, ``signalled``) or read from outside
(``read_stacks``), reading every task's output meanwhile; nothing is decided if the job advanced meanwhile or
the stacks show it working (the check's line is kept in the stall status). Until the lead's first report of an
attempt, a training task whose run still waits for a place to run (a ``Placing`` runtime: a gang waiting for room)
moves the clock on: the first-step allowance counts from when every one of them could start. On a stall it keeps
the stacks (``keep_stacks``; a write that fails is logged, the stall acted on), fills the stall status, marks the
suspects' statuses and returns ``decide(Stalled(...))``: the caller applies that decision. A stall is judged afresh
after its allowance, whatever was decided.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from launcher.plan.planner import Plan, Task
from launcher.protocol import events
from launcher.protocol.stacks_signal import capped
from launcher.supervision.job_record import JobRecord
from launcher.supervision.publisher import log, one_line
from launcher.supervision.rules import Decision, Stalled
from launcher.supervision.runtime import Placing, signalled
from launcher.supervision.stack_evidence import read, two_samples
from launcher.supervision.stall import SIGNS_OF_LIFE, WATCHED_EVENTS, StallClock, StallVerdict, after_event, conclude, describe, judge
from launcher.supervision.status import StallStatus
from launcher.supervision.task_runs import TaskRuns
from launcher.supervision.tuning import Tuning

#: How long a stall waits for the tasks' stack dumps before it acts.
STACKS_SECONDS = 10.0
#: Keeps a stall's stacks: ``keep(number, {task: dump or None})`` -> where to read them (None: not kept).
KeepStacks = Callable[[int, Mapping[str, "str | None"]], "str | None"]


class StallWatch:
    """See the module contract."""

    def __init__(self, plan: Plan, runs: TaskRuns, record: JobRecord, keep_stacks: KeepStacks | None,
                 tuning: Tuning, cancelled: threading.Event):
        self.plan, self.runs, self.record, self.keep_stacks = plan, runs, record, keep_stacks
        self.tuning, self._cancelled = tuning, cancelled
        self._lead = plan.lead().name
        self.clock = StallClock(tuning.clock(), reporting=record.stall.watching)

    def started(self) -> None:
        """The training group (re)started: a new attempt."""
        self.clock = self.clock.started(self.tuning.clock())

    def adopted(self, previous: StallStatus | None) -> None:
        """Carry on another supervisor's stall status."""
        if previous is not None:
            self.record.job.stall = replace(previous, suspects=list(previous.suspects))
            if previous.watching:
                self.clock = self.clock.reports()

    def event(self, task: Task, event: events.Event) -> None:
        if task.name != self._lead:
            return
        self.clock = after_event(self.clock, event.event, self.tuning.clock())  # finished: the exit's allowance
        if event.event in WATCHED_EVENTS or event.event in SIGNS_OF_LIFE:
            self.record.stall.watching = True

    def check(self, decide: Callable[[Stalled], Decision]) -> Decision | None:
        if self.clock.last_report is None and self._placing():
            self.clock = self.clock.again(self.tuning.clock())  # waiting for room is no silence of the program
            return None
        judgement = judge(self.clock, self.tuning.clock(), self.plan.policy.stall_floor_seconds)
        if judgement.verdict is not StallVerdict.SUSPECTED:
            return None
        before = self.clock
        running = self.runs.running()
        last: dict[str, str | None] = {}  # each task's latest dump, kept for a stall

        def sample() -> dict[str, str | None]:
            dumps = self._collect_stacks()
            last.update({name: dump for name, dump in dumps.items() if dump is not None or name not in last})
            return dumps

        samples = two_samples(sample, lambda seconds: self._wait_quietly(seconds, before),
                              {run.task.name: signalled(self.runs.runtime, run.dumps_stacks) for run in running},
                              {run.task.name: run.task.type.trains for run in running}, self.tuning.stack_gap)
        if samples is None or self.clock.since != before.since:
            return None  # the job advanced meanwhile
        reading = read(samples)
        finding = conclude(judgement, reading)
        stall = self.record.stall
        stall.evidence = finding.evidence
        if finding.verdict is not StallVerdict.STALLED:
            self.clock = self.clock.looked(self.tuning.clock())
            stall.last_check = describe(judgement, reading, finding, self.tuning.stack_gap)
            log(f"stall watchdog: {stall.last_check}")
            return None
        finished, self.clock = self.clock.finished, self.clock.again(self.tuning.clock())  # judged afresh later
        stall.stalls += 1
        directory = self._keep(stall.stalls, last)
        what = describe(judgement, reading, finding, self.tuning.stack_gap, directory)
        decision = decide(Stalled(tuple(reading.suspects), what, finished, self.record.used()))
        stall.message, stall.suspects, stall.reason, stall.stacks_dir = (decision.message, list(reading.suspects),
                                                                          reading.why, directory)
        stall.last_check = decision.message
        for name in reading.suspects:
            self.runs[name].status.message = "stalled (suspected)"
        log(f"stall watchdog: {decision.message}")
        return decision

    def _placing(self) -> bool:
        """Whether a training task's current run still waits for a place to run (a ``Placing`` runtime)."""
        runtime = self.runs.runtime
        return isinstance(runtime, Placing) and any(
            run.task.type.trains and runtime.placing(run.task) for run in self.runs.running())

    def _wait_quietly(self, seconds: float, before: StallClock) -> bool:
        """Wait ``seconds`` reading every running task's output; False once the job advanced past ``before``
        (or on cancellation)."""
        ends = time.monotonic() + seconds
        while time.monotonic() < ends and not self._cancelled.is_set():
            self._cancelled.wait(min(self.tuning.poll_seconds, max(0.0, ends - time.monotonic())))
            for run in self.runs.running():
                self.runs.read(run)
            if self.clock.since != before.since:
                return False
        return not self._cancelled.is_set()

    def _collect_stacks(self) -> dict[str, str | None]:
        """Every running task's stacks: asked for, or read from outside; ``{task: dump, None if it gave none}``."""
        runtime = self.runs.runtime
        running = self.runs.running()
        asked = [run for run in running if signalled(runtime, run.dumps_stacks)]
        for run in asked:
            run.stack_lines, run.stack_bytes = [], 0
            runtime.dump_stacks(run.task)
        outside = {run.task.name: runtime.read_stacks(run.task) for run in running
                   if not signalled(runtime, run.dumps_stacks)}
        ends = time.monotonic() + STACKS_SECONDS
        while asked and time.monotonic() < ends and not self._cancelled.is_set():
            before = sum(len(run.stack_lines) for run in asked)
            self._cancelled.wait(self.tuning.poll_seconds)
            for run in asked:
                self.runs.read(run)
            if all(run.stack_lines for run in asked) and sum(len(run.stack_lines) for run in asked) == before:
                break  # every task answered and none wrote more during a poll round
        return {run.task.name: outside[run.task.name] if run.task.name in outside
                else capped("\n".join(run.stack_lines)) or None for run in running}

    def _keep(self, number: int, dumps: Mapping[str, str | None]) -> str | None:
        """Each task's dump kept by ``keep_stacks``; where to read them, or None where they were not kept."""
        if self.keep_stacks is None:
            return None
        try:
            return self.keep_stacks(number, dumps)
        except OSError as exc:
            log(f"cannot write the stacks: {one_line(exc)}")
            return None
