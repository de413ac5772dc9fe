"""The supervision loop: start every task of a plan through a backend's ``Runtime`` and apply its policy.

Contract: ``Supervisor.run`` drives a backend's ``Runtime`` until the job is terminal and always tries
to leave no task running. Decisions come from ``launcher.supervision.rules``; this loop applies them,
the deadline, linger after success and cancellation, the stall watchdog (with stacks and
stragglers), standbys and the goodput ledger, and publishes a true status. Engine faults are retried
up to ``fault_retries`` rounds in a row, then the job fails; nothing escapes ``run`` as a traceback. A status
``on_status`` cannot write (a full disk, an API server refusing it) is logged in one line and written again at the
next publish (the job's end: up to ``fault_retries`` times): it does not end the supervision
(``launcher.supervision.publisher``, the harness's own writes' home too). A task's error text
is kept to ``LAST_ERROR_CHARS``.
Events count only under the plan's token. With ``resume`` it adopts a dead supervisor's tasks and
carries its policy state on. Exit codes are shell-style (128+N). The full behaviour:
docs/design-notes.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from launcher.errors import LaunchError
from launcher.plan.planner import Plan, Task
from launcher.plan.policy import LOG_LINE_CHARS
from launcher.protocol import events
from launcher.protocol.exitcodes import LOST_EXIT
from launcher.protocol.progress import counts, progress, seed
from launcher.protocol.stacks_signal import MAX_STACK_BYTES, capped
from launcher.spec.models import LOG_TAIL_LINES
from launcher.supervision.faults import engine_fault
from launcher.supervision.goodput import Disruption, Ledger
from launcher.supervision.noise import is_noise
from launcher.supervision.publisher import Publisher, one_line
from launcher.supervision.rules import Action, Decision, Exited, Rules, Stalled, Used, decision_order
from launcher.supervision.runtime import OomReports, Runtime, Standbys, signalled
from launcher.supervision.stack_dumps import is_stack_line
from launcher.supervision.stack_evidence import GAP_SECONDS, read, two_samples
from launcher.supervision.stall import (
    SIGNS_OF_LIFE,
    WATCHED_EVENTS,
    StallClock,
    StallVerdict,
    after_event,
    conclude,
    describe,
    judge,
)
from launcher.supervision.status import JobStatus, StallStatus, State, TaskStatus, clipped
from launcher.supervision.stragglers import WINDOW as STRAGGLER_WINDOW
from launcher.supervision.stragglers import StepBreakdown, stragglers

#: Poll rounds in a row that may fail on a runtime fault before the job is failed.
FAULT_RETRIES = 5
#: Seconds between such rounds.
FAULT_PAUSE_SECONDS = 2.0
#: Seconds between terminate and kill when no task can be saving.
STOP_SECONDS = 5.0
#: Seconds between terminate and kill for the rest of a group restarted after a failure (see the module contract):
#: enough for a task that is already ending to finish its last lines.
RESTART_STOP_SECONDS = 0.25


#: Keeps a stall's stacks: ``keep(number, {task: dump or None})`` -> where to read them (None: not kept).
KeepStacks = Callable[[int, Mapping[str, "str | None"]], "str | None"]

#: A status is republished for its goodput alone after this many seconds.
GOODPUT_REFRESH_SECONDS = 5.0
#: How much of a task's last output line its status keeps.
LAST_LINE_CHARS = 200
#: How much of a task's last error line (or of its ``failed`` event's reason) the supervisor keeps for its messages.
LAST_ERROR_CHARS = 1000
#: How long a stall waits for the tasks' stack dumps before it acts.
STACKS_SECONDS = 10.0


@dataclass
class _Run:
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
    #: The current run's last output lines (events and stack dumps left out), for the failure rules: each kept to
    #: the ``LOG_LINE_CHARS`` a log pattern reads, so at most ``LOG_TAIL_LINES * LOG_LINE_CHARS`` characters a task.
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    #: The current run ended by the kernel's OOM killer (an ``OomReports`` runtime said so).
    oom_killed: bool = False

    def error(self) -> str:
        return self.failed_reason or self.last_error or "(no output)"


@dataclass
class _Restart:
    """A restart under way: the runs still to stop, then the runs to start (a fault may cut it short)."""

    stop: list[_Run]
    start: list[_Run]
    grace_seconds: float


class _Fault(Exception):
    """A fault a round may be retried for (see the module contract), carrying the runtime's error."""


class Supervisor:
    """Runs one cluster through a ``Runtime`` until it succeeds, fails, passes its deadline or is cancelled.

    ``on_status`` receives a fresh ``JobStatus`` after every change (the
    harness writes it to disk, for ``status`` from other shells);
    ``on_started`` is called once, when every task has been started.
    ``cancel`` may be called from another thread or a signal handler.
    ``resume`` adopts the tasks of a job another supervisor ran (see the module contract).
    ``pause(seconds)`` waits between poll rounds; it may end early (the harness ends it on any signal,
    so a task's exit is seen at once); by default it waits for ``cancel``. ``clock`` is what the stall
    watchdog's times are read from; ``stack_gap`` the seconds between a suspected stall's two stack samples.
    """

    def __init__(
        self,
        plan: Plan,
        runtime: Runtime,
        *,
        on_status: Callable[[JobStatus], None] = lambda status: None,
        on_started: Callable[[], None] = lambda: None,
        poll_seconds: float = 0.5,
        grace_seconds: float | None = None,
        fault_retries: int = FAULT_RETRIES,
        fault_pause: float = FAULT_PAUSE_SECONDS,
        resume: JobStatus | None = None,
        keep_stacks: KeepStacks | None = None,
        pause: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        stack_gap: float = GAP_SECONDS,
    ):
        self.plan = plan
        self.rules = Rules.from_plan(plan)
        self.runtime = runtime
        self.on_status = on_status
        self.on_started = on_started
        self.poll_seconds = poll_seconds
        self.grace_seconds = plan.policy.linger_seconds if grace_seconds is None else grace_seconds
        self.fault_retries = fault_retries
        self.fault_pause = fault_pause
        self._runs = {t.name: _Run(t, TaskStatus(t.name, State.PENDING)) for t in plan.tasks}
        self._job = JobStatus(plan.name, plan.backend, State.PENDING, progress=seed(plan.run_config),
                              tensorboard_dir=plan.run_config.tensorboard_dir)
        self._published: JobStatus | None = None
        self._publisher = Publisher(lambda status: self.on_status(status))
        self._cancelled = threading.Event()
        self._pause = pause or self._cancelled.wait
        self._lead = plan.lead().name
        self._events = events.EventReader(plan.event_token)
        self._resume = resume
        #: Exits the next round decides first: found while adopting, or left when a fault cut a round short.
        self._undecided: list[tuple[str, int]] = []
        self.keep_stacks = keep_stacks
        self._left = threading.Event()
        self._step_times: dict[str, list[StepBreakdown]] = {}
        self._now = clock
        self.stack_gap = stack_gap
        self._restarting: _Restart | None = None
        builtin = plan.run_config.lead_runs_entrypoint and self._events.reads  # which reports steps we can read
        self._clock = StallClock(clock(), reporting=builtin)
        self._job.stall = StallStatus(watching=builtin)
        self._standbys = [t for t in plan.tasks if t.standby_command]
        every = plan.run_config.backup_every_steps
        self._backup_every = every if isinstance(every, int) else None
        self._ledger = Ledger.launched(time.time(), self._backup_every)
        self._ended_at: float | None = None

    def cancel(self) -> None:
        self._cancelled.set()

    def leave(self) -> None:
        """End ``run`` leaving every task as it is, its last status standing (a supervisor moved elsewhere:
        the next one adopts them). May be called from another thread or a signal handler."""
        self._left.set()
        self._cancelled.set()

    @property
    def left(self) -> bool:
        """Whether ``leave`` ended (or will end) ``run``: the tasks are left to the next supervisor."""
        return self._left.is_set()

    def status(self) -> JobStatus:
        stall = None if self._job.stall is None else replace(self._job.stall, suspects=list(self._job.stall.suspects))
        now = self._ended_at if self._ended_at is not None else time.time()
        return replace(self._job, tasks=[replace(r.status) for r in self._runs.values()], stall=stall,
                       stragglers=list(self._job.stragglers), goodput=self._ledger.goodput(now))

    def run(self) -> JobStatus:
        """Supervise until terminal; whatever happens, every task is stopped before this returns (unless ``leave``)."""
        try:
            if self._resume is None:
                self._job.started_at = time.time()
                self._ledger = Ledger.launched(self._job.started_at, self._backup_every)
                self._start(self._runs)
            else:
                self._adopt(self._resume)
            self.on_started()
            if not self._clock.reporting:
                _log(f"stall watchdog: {self.plan.name} runs its own program; it cannot see steps until the program "
                     "reports them (launcher.progress: ProgressCallback or report_step)")
            self._set_job(State.RUNNING, "running")
            state, message = self._supervise()
            if self._left.is_set():
                return self.status()
            if state is State.SUCCEEDED:
                self._linger()
            self._set_job(state, message)
        except LaunchError as exc:
            self._set_job(State.FAILED, f"failed: {exc}")
        except Exception as exc:  # a runtime fault outside the retried rounds (the first start), or not retried
            _log(f"runtime error: {one_line(exc)}")
            self._set_job(State.FAILED, f"failed: the runtime failed: {one_line(exc)}")
        finally:
            if not self._left.is_set():
                self._stop_the_rest()
        return self.status()

    def _stop_the_rest(self) -> None:
        """Stop the tasks still running, then publish the job's end."""
        try:
            grace = self.plan.policy.save_grace_seconds if self._cancelled.is_set() else STOP_SECONDS
            self._stop([r for r in self._runs.values() if r.running], "stopped", grace)
        except Exception as exc:
            _log(f"cannot stop the remaining tasks: {one_line(exc)}")
        self._publisher.publish_end(self.status(), self.fault_retries, self.fault_pause)

    # -- the loop -------------------------------------------------------------------------------

    def _supervise(self) -> tuple[State, str]:
        deadline = self.plan.policy.deadline_seconds
        started = self._job.started_at or time.time()
        ends = None if deadline is None else time.monotonic() + deadline - (time.time() - started)
        faults = 0
        while True:
            if self._cancelled.is_set():
                return State.CANCELLED, "cancelled"
            if ends is not None and time.monotonic() >= ends:
                return State.FAILED, f"failed: deadline of {deadline} s exceeded"
            try:
                ended = self._round()
            except _Fault as fault:
                faults += 1
                exc = fault.__cause__ or fault
                _log(f"runtime error ({faults}/{self.fault_retries}): {one_line(exc)}")
                if faults >= self.fault_retries:
                    return State.FAILED, f"failed: the runtime failed {faults} times in a row: {one_line(exc)}"
                self._cancelled.wait(self.fault_pause)
                continue
            faults = 0
            if ended is not None:
                return ended
            self._publish()
            self._pause(self.poll_seconds)

    def _round(self) -> tuple[State, str] | None:
        """One round: resume a restart a fault cut short, poll, decide, watch; the job's end if it ended.
        Raises ``_Fault`` for a fault the round may be retried for (see the module contract)."""
        try:
            if self._restarting is not None:
                self._resume_restart()
            try:
                exits = decision_order(self._poll())
            except LaunchError:
                raise
            except Exception as exc:  # any fault of a poll: the runtime's own errors are retried
                raise _Fault() from exc
            for index, (name, code) in enumerate(exits):
                if self._runs[name].running:
                    continue  # restarted by an earlier decision of this round
                run = self._runs[name]
                decision = self.rules.decide(Exited(name, code, self._exited(), self._used(), run.error(),
                                                    tuple(run.tail), run.oom_killed))
                if decision.action is Action.RESTART:
                    self._undecided = exits[index + 1:]  # the next round's, should a fault cut this restart short
                    self._restart(decision)
                    self._undecided = []
                    continue
                if decision.action is Action.SUCCEED:
                    return State.SUCCEEDED, decision.message
                if decision.action is Action.FAIL:
                    if run.task.type.trains:
                        self._ledger = self._ledger.disrupted(Disruption.FAILURE, time.time())
                    return State.FAILED, decision.message
            stalled = self._watch()
        except (_Fault, LaunchError):
            raise
        except Exception as exc:
            if engine_fault(exc):
                raise _Fault() from exc
            raise
        return None if stalled is None else (State.FAILED, stalled)

    def _watch(self) -> str | None:
        """Judge the job's progress; on a suspected stall read the stacks twice, and on a stall act. A message
        when the job fails of it."""
        judgement = judge(self._clock, self._now(), self.plan.policy.stall_floor_seconds)
        if judgement.verdict is not StallVerdict.SUSPECTED:
            return None
        before = self._clock
        running = [run for run in self._runs.values() if run.running]
        last: dict[str, str | None] = {}  # each task's latest dump, kept for a stall

        def sample() -> dict[str, str | None]:
            dumps = self._collect_stacks()
            last.update({name: dump for name, dump in dumps.items() if dump is not None or name not in last})
            return dumps

        samples = two_samples(sample, lambda seconds: self._wait_quietly(seconds, before),
                              {run.task.name: signalled(self.runtime, run.dumps_stacks) for run in running},
                              {run.task.name: run.task.type.trains for run in running}, self.stack_gap)
        if samples is None or self._clock.since != before.since:
            return None  # the job advanced meanwhile
        reading = read(samples)
        finding = conclude(judgement, reading)
        assert self._job.stall is not None
        stall = self._job.stall
        stall.evidence = finding.evidence
        if finding.verdict is not StallVerdict.STALLED:
            self._clock = self._clock.looked(self._now())
            stall.last_check = describe(judgement, reading, finding, self.stack_gap)
            _log(f"stall watchdog: {stall.last_check}")
            return None
        finished, self._clock = self._clock.finished, self._clock.again(self._now())  # warn: judged afresh later
        stall.stalls += 1
        names, why = reading.suspects, reading.why
        directory = self._write_stacks(stall.stalls, last)
        what = describe(judgement, reading, finding, self.stack_gap, directory)
        decision = self.rules.decide(Stalled(tuple(names), what, finished, self._used()))
        stall.message, stall.suspects, stall.reason, stall.stacks_dir = decision.message, list(names), why, directory
        stall.last_check = decision.message
        for name in names:
            self._runs[name].status.message = "stalled (suspected)"
        _log(f"stall watchdog: {decision.message}")
        if decision.action is Action.CONTINUE:  # warn only: the stall's time is lost, nothing is disrupted
            self._ledger = self._ledger.stalled(time.time())
            self._job.message = decision.message
            return None
        self._ledger = self._ledger.disrupted(Disruption.STALL, time.time())
        if decision.action is Action.RESTART:
            self._restart(decision)
            return None
        return decision.message  # Action.FAIL

    def _wait_quietly(self, seconds: float, before: StallClock) -> bool:
        """Wait ``seconds`` reading every running task's output; False once the job advanced past ``before``
        (or on cancellation)."""
        ends = time.monotonic() + seconds
        while time.monotonic() < ends and not self._cancelled.is_set():
            self._cancelled.wait(min(self.poll_seconds, max(0.0, ends - time.monotonic())))
            for run in self._runs.values():
                if run.running:
                    self._read(run)
            if self._clock.since != before.since:
                return False
        return not self._cancelled.is_set()

    def _collect_stacks(self) -> dict[str, str | None]:
        """Every running task's stacks: asked for, or read from outside; ``{task: dump, None if it gave none}``."""
        running = [run for run in self._runs.values() if run.running]
        asked = [run for run in running if signalled(self.runtime, run.dumps_stacks)]
        for run in asked:
            run.stack_lines, run.stack_bytes = [], 0
            self.runtime.dump_stacks(run.task)
        read = {run.task.name: self.runtime.read_stacks(run.task) for run in running
                if not signalled(self.runtime, run.dumps_stacks)}
        ends = time.monotonic() + STACKS_SECONDS
        while asked and time.monotonic() < ends and not self._cancelled.is_set():
            before = sum(len(run.stack_lines) for run in asked)
            self._cancelled.wait(self.poll_seconds)
            for run in asked:
                self._read(run)
            if all(run.stack_lines for run in asked) and sum(len(run.stack_lines) for run in asked) == before:
                break  # every task answered and none wrote more during a poll round
        return {run.task.name: read[run.task.name] if run.task.name in read else capped("\n".join(run.stack_lines)) or None
                for run in running}

    def _write_stacks(self, number: int, dumps: Mapping[str, str | None]) -> str | None:
        """Each task's dump kept by ``keep_stacks``; where to read them, or None where they were not kept."""
        if self.keep_stacks is None:
            return None
        try:
            return self.keep_stacks(number, dumps)
        except OSError as exc:
            _log(f"cannot write the stacks: {one_line(exc)}")
            return None

    def _poll(self) -> list[tuple[str, int]]:
        """Read new output of every running task; record and return the runs that ended, in plan order."""
        ended, self._undecided = self._undecided, []
        for name, run in self._runs.items():
            if not run.running:
                continue
            code = self.runtime.poll(run.task)
            self._read(run, to_the_end=code is not None)
            if code is not None:
                run.running = False
                run.status.exit_code = code
                run.status.state = State.of_exit(code)
                run.oom_killed = code != 0 and isinstance(self.runtime, OomReports) and self.runtime.oom_killed(run.task)
                ended.append((name, code))
        return ended

    def _used(self) -> Used:
        return Used(self._job.restarts, self._job.preemptions)

    def _exited(self) -> dict[str, int]:
        return {name: run.status.exit_code for name, run in self._runs.items()
                if not run.running and run.status.exit_code is not None}

    def _restart(self, decision: Decision) -> None:
        runs = [self._runs[name] for name in decision.restart]
        if any(run.task.type.trains for run in runs):
            kind = Disruption.PREEMPTION if decision.preemption else Disruption.FAILURE
            self._ledger = self._ledger.disrupted(kind, time.time())
        if decision.preemption:
            self._job.preemptions += 1
        else:
            self._job.restarts += 1
        for run in runs:
            if decision.preemption:
                run.status.preemptions += 1
            else:
                run.status.restarts += 1
        self._set_job(State.RESTARTING, decision.message)
        grace = self.plan.policy.save_grace_seconds if decision.preemption else RESTART_STOP_SECONDS
        self._restarting = _Restart([r for r in runs if r.running], runs, grace)
        self._resume_restart()

    def _resume_restart(self) -> None:
        """Carry the restart under way on: stop what it had not stopped, start what it had not started."""
        restart = self._restarting
        assert restart is not None
        if restart.stop:
            self._stop([r for r in restart.stop if r.running], "stopped for a restart", restart.grace_seconds)
            restart.stop = []
            for run in restart.start:
                run.status.state = State.RESTARTING
            self._publish()
        self._start({r.task.name: r for r in restart.start if not r.running})
        self._restarting = None
        self._job.state = State.RUNNING

    def _adopt(self, previous: JobStatus) -> None:
        """Take over the job ``previous`` describes: its counters, progress and clock, and every task's run."""
        self._job.restarts = previous.restarts
        self._job.preemptions = previous.preemptions
        self._job.started_at = previous.started_at or time.time()
        self._ledger = (Ledger.launched(self._job.started_at, self._backup_every) if previous.goodput is None else
                        Ledger.resumed(previous.goodput, self._job.started_at, previous.progress.step,
                                       self._backup_every))
        self._job.progress = previous.progress
        if previous.stall is not None:
            self._job.stall = replace(previous.stall, suspects=list(previous.stall.suspects))
            if previous.stall.watching:
                self._clock = self._clock.reports()
        known = {t.name: t for t in previous.tasks}
        to_start = {}
        for name, run in self._runs.items():
            before = known.get(name)
            if before is not None:
                run.status = replace(before)
            if before is not None and before.state.terminal:
                continue  # its run had ended and was decided on
            adopted = self.runtime.adopt(run.task)
            fresh = before is None or before.state in (State.PENDING, State.RESTARTING)
            if fresh and (not adopted or self.runtime.poll(run.task) is not None):
                to_start[name] = run  # being (re)started when the supervisor died, or never started
                continue
            if not adopted:
                run.last_error = f"{name} left no trace while unsupervised: taken as killed"
                run.status.state, run.status.exit_code = State.FAILED, LOST_EXIT
                self._undecided.append((name, LOST_EXIT))
                continue
            run.running = True
            run.status.state = State.RUNNING
        _log(f"adopted {sum(r.running for r in self._runs.values())} running task(s) of {self.plan.name}; "
             f"restarts used: {self._job.restarts}, preemptions: {self._job.preemptions}")
        self._start(to_start)

    def _linger(self) -> None:
        """After success: let the remaining tasks exit by themselves for ``grace_seconds``."""
        ends = time.monotonic() + self.grace_seconds
        faults = 0
        while True:
            try:
                self._poll()
            except Exception as exc:  # the job succeeded: a fault ends the linger (``run`` stops the rest), not that
                faults += 1
                _log(f"runtime error while the others linger ({faults}/{self.fault_retries}): {one_line(exc)}")
                if faults >= self.fault_retries:
                    return
            self._publish()
            left = ends - time.monotonic()
            if not any(r.running for r in self._runs.values()) or left <= 0 or self._cancelled.is_set():
                return
            self._cancelled.wait(min(self.poll_seconds, left))

    # -- actions ----------------------------------------------------------------------------------

    def _start(self, runs: Mapping[str, _Run]) -> None:
        if any(run.task.type.trains for run in runs.values()):
            self._clock = self._clock.started(self._now())
        for run in runs.values():
            self.runtime.start(run.task)
            run.running = True
            run.dumps_stacks = False
            run.failed_reason = run.last_error = ""
            run.tail.clear()
            run.oom_killed = False
            run.status.state = State.RUNNING
            run.status.exit_code = None
            run.status.message = ""
        self._prepare_standbys()
        self._publish()

    def _prepare_standbys(self) -> None:
        """Standbys for the restarts to come, as soon as the tasks they stand by for have started (they import
        at idle priority meanwhile: a failure early in a run finds them ready); a runtime fault here is logged
        and costs only their speed."""
        if not self._standbys or not isinstance(self.runtime, Standbys):
            return
        try:
            self.runtime.prepare(self._standbys)
        except Exception as exc:
            _log(f"no standbys: {one_line(exc)}")

    def _stop(self, runs: Iterable[_Run], message: str, grace_seconds: float) -> None:
        runs = list(runs)
        if not runs:
            return
        self.runtime.stop([r.task for r in runs], grace_seconds)
        for run in runs:
            self._read(run, to_the_end=True)
            run.running = False
            run.status.state = State.CANCELLED
            run.status.message = message

    def _read(self, run: _Run, to_the_end: bool = False) -> None:
        """Take the run's new output, one batch; ``to_the_end`` (the run ended): batch after batch to its end."""
        while True:
            lines = self.runtime.output(run.task)
            for line in lines:
                self._take(run, line)
            if not (to_the_end and lines):
                return

    def _take(self, run: _Run, line: str) -> None:
        """One output line: a stack dump's (kept up to ``MAX_STACK_BYTES``), an event, or the task's own (its tail
        and last error)."""
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
        if event is not None:
            self._on_event(run, event)

    def _on_event(self, run: _Run, event: events.Event) -> None:
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
            times = self._step_times.setdefault(run.task.name, [])
            run.status.step_time = StepBreakdown.of(event)
            times[:] = [*times, run.status.step_time][-STRAGGLER_WINDOW:]
            self._job.stragglers = stragglers(self._step_times)
        if run.task.name == self._lead:  # after_event keeps what its events say (finished: the exit's allowance)
            self._clock = after_event(self._clock, event.event, self._now())
            if self._job.stall is not None and (event.event in WATCHED_EVENTS or event.event in SIGNS_OF_LIFE):
                self._job.stall.watching = True
        if counts(event, from_lead=run.task.name == self._lead):
            self._job.progress = progress(self._job.progress, event)
        self._ledger = self._ledger.event(event, from_lead=run.task.name == self._lead)

    def _set_job(self, state: State, message: str) -> None:
        """Set the job's state; publish it at once unless it is terminal: ``run`` publishes the end only once the
        tasks still running were stopped, so no status says the job ended while a task of it still runs."""
        if state.terminal and self._ended_at is None:
            self._ended_at = time.time()
        self._job.state = state
        self._job.message = message
        if not state.terminal:
            self._publish()

    def _publish(self) -> bool:
        """Publish the status if it changed (or only its goodput is stale); False if ``on_status`` failed."""
        status, last = self.status(), self._published
        stale = (last is None or last.goodput is None or status.goodput is None
                 or status.goodput.wall_seconds - last.goodput.wall_seconds >= GOODPUT_REFRESH_SECONDS)
        if last is None or replace(status, goodput=None) != replace(last, goodput=None) or stale:
            if not self._publisher.publish(status):
                return False
            self._published = status
        return True


def _log(message: str) -> None:
    print(f"supervisor: {message}", file=sys.stderr, flush=True)
