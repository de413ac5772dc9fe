"""The supervision loop: start every task of a plan through a backend's ``Runtime`` and apply its policy.

Contract: ``Supervisor.run`` drives a backend's ``Runtime`` (``launcher.supervision.runtime``) until the job is
terminal and always tries to leave no task running. Each round it polls the tasks (``task_runs``: their output,
events and exits), asks the ``Decider`` about each exit (``decisions``: one typed status in, one typed ``Decision``
out, root cause first) and applies it, then lets the stall watch judge the job (``stall_watch``), and publishes a
true status (``publisher``). Around the loop: the deadline (``deadline``), the linger after success (``linger``),
standbys prepared after each start (``runtime.prepare_standbys``), the goodput and counters (``job_record``),
adoption of a dead supervisor's tasks with ``resume`` (``adoption``; tried again, backed off, while the runtime
raises ``backoff.NotNow``). Engine faults are retried up to ``Tuning.fault_retries`` rounds in a row (``faults``),
then the job fails; a restart a fault cut short is carried on at the next round; nothing escapes ``run`` as a
traceback. A round whose poll meets ``backoff.NotNow`` (the engine cannot be reached now, or throttles: nothing is
known of the runs) decides nothing, is no fault, and the next round waits a ``backoff.Backoff`` pause from
``poll_seconds`` on (doubling, at least its ``Retry-After``); the first round that polls again is back at
``poll_seconds`` and publishes at once. A status ``on_status`` cannot write is logged and written again at a later
publish, backed off likewise (``publisher``; the job's end: up to ``fault_retries`` times): it does not end the
supervision. Exit codes are shell-style (128+N). A task that cannot be started (``LaunchError``) fails the job at
once. Stops give ``save_grace_seconds`` between SIGTERM and the kill on cancellation and to a preempted group,
``RESTART_STOP_SECONDS`` (none: killed at once) to the rest of a group restarted after a failure or stall (no save is
possible without the lost peer), ``STOP_SECONDS`` otherwise.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.protocol import events
from launcher.supervision.adoption import adopt
from launcher.supervision.backoff import Backoff, NotNow
from launcher.supervision.deadline import Deadline
from launcher.supervision.decisions import Action, Decider, Decision, Exited, decision_order
from launcher.supervision.faults import FaultsInARow, engine_fault
from launcher.supervision.goodput import Disruption
from launcher.supervision.job_record import JobRecord
from launcher.supervision.linger import linger
from launcher.supervision.publisher import Publisher, log, one_line
from launcher.supervision.runtime import Runtime, prepare_standbys
from launcher.supervision.stall_watch import KeepStacks, StallWatch
from launcher.supervision.status import JobStatus, State
from launcher.supervision.task_runs import TaskRun, TaskRuns
from launcher.supervision.tuning import Tuning

#: Seconds between terminate and kill when no task can be saving.
STOP_SECONDS = 5.0
#: Seconds between terminate and kill for the rest of a group restarted after a failure: none. Without the lost
#: peer no task can save, and a MultiWorkerMirrored task notices the loss only after about 0.2 s or more (it blocks
#: in the all-reduce), so a grace only delayed every restart (by 0.25 s, a tenth of a local one).
RESTART_STOP_SECONDS = 0.0


@dataclass
class _Restart:
    """A restart under way: the runs still to stop, then the runs to start (a fault may cut it short)."""

    stop: list[TaskRun]
    start: list[TaskRun]
    grace_seconds: float


class _Fault(Exception):
    """A fault a round may be retried for (see the module contract), carrying the runtime's error."""


class Supervisor:
    """Runs one cluster through a ``Runtime`` until it succeeds, fails, passes its deadline or is cancelled.

    ``on_status`` receives a fresh ``JobStatus`` after every change (the harness writes it, for ``status`` from
    other shells); ``on_started`` is called once, when every task has been started. ``cancel`` and ``leave`` may
    be called from another thread or a signal handler. ``resume`` adopts the tasks of a job another supervisor ran;
    ``keep_stacks`` keeps a stall's stacks; ``tuning`` its timing (``launcher.supervision.tuning``).
    """

    def __init__(self, plan: Plan, runtime: Runtime, *, on_status: Callable[[JobStatus], None] = lambda status: None,
                 on_started: Callable[[], None] = lambda: None, resume: JobStatus | None = None,
                 keep_stacks: KeepStacks | None = None, tuning: Tuning | None = None):
        self.plan, self.runtime, self.tuning = plan, runtime, tuning or Tuning()
        self.decider = Decider.from_plan(plan)
        self.on_started = on_started
        self._resume = resume
        self._cancelled, self._left = threading.Event(), threading.Event()
        self._pause = self.tuning.pause or self._cancelled.wait
        self._publisher = Publisher(on_status, self.tuning.clock, Backoff(self.tuning.poll_seconds))
        #: The rounds in a row whose poll met ``NotNow``, and the pause they call for.
        self._unreachable = Backoff(self.tuning.poll_seconds)
        self._runs = TaskRuns(plan, runtime, self._on_event)
        self._record = JobRecord(plan, watching=plan.run_config.lead_runs_entrypoint and self._runs.reads_events)
        self._watch = StallWatch(plan, self._runs, self._record, keep_stacks, self.tuning, self._cancelled)
        #: Exits the next round decides first: found while adopting, or left when a fault cut a round short.
        self._undecided: list[tuple[str, int]] = []
        self._restarting: _Restart | None = None

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
        return self._record.status(run.status for run in self._runs.runs.values())

    def run(self) -> JobStatus:
        """Supervise until terminal; whatever happens, every task is stopped before this returns (unless ``leave``)."""
        try:
            if self._resume is None:
                self._record.launched()
                self._start(self._runs.runs.values())
            else:
                self._adopt(self._resume)
            self.on_started()
            if not self._watch.clock.reporting:
                log(f"stall watchdog: {self.plan.name} runs its own program; it cannot see steps until the program "
                    "reports them (launcher.progress: ProgressCallback or report_step)")
            self._set_job(State.RUNNING, "running")
            state, message = self._supervise()
            if self._left.is_set():
                return self.status()
            if state is State.SUCCEEDED:
                linger(self._poll, self._publish, lambda: bool(self._runs.running()),
                       self.plan.policy.linger_seconds if self.tuning.linger_seconds is None
                       else self.tuning.linger_seconds, self.tuning, self._cancelled)
            self._set_job(state, message)
        except LaunchError as exc:
            self._set_job(State.FAILED, f"failed: {exc}")
        except Exception as exc:  # a runtime fault outside the retried rounds (the first start), or not retried
            log(f"runtime error: {one_line(exc)}")
            self._set_job(State.FAILED, f"failed: the runtime failed: {one_line(exc)}")
        finally:
            if not self._left.is_set():
                self._stop_the_rest()
        return self.status()

    def _stop_the_rest(self) -> None:
        """Stop the tasks still running, then publish the job's end."""
        try:
            grace = self.plan.policy.save_grace_seconds if self._cancelled.is_set() else STOP_SECONDS
            self._runs.stop(self._runs.running(), "stopped", grace)
        except Exception as exc:
            log(f"cannot stop the remaining tasks: {one_line(exc)}")
        self._publisher.publish_end(self.status(), self.tuning.fault_retries, self.tuning.fault_pause)

    def _supervise(self) -> tuple[State, str]:
        deadline = Deadline(self.plan.policy.deadline_seconds, self._record.job.started_at or time.time())
        faults = FaultsInARow(self.tuning.fault_retries)
        while True:
            if self._cancelled.is_set():
                return State.CANCELLED, "cancelled"
            if deadline.passed():
                return State.FAILED, deadline.message
            try:
                ended = self._round()
            except NotNow as not_now:
                self._back_off(not_now, deadline.left())
                continue
            except _Fault as fault:
                exc = fault.__cause__ or fault
                if faults.failed(exc):
                    return State.FAILED, f"failed: the runtime failed {faults.count} times in a row: {one_line(exc)}"
                self._cancelled.wait(self.tuning.fault_pause)
                continue
            faults.ok()
            if self._unreachable.failures:
                log("the runtime reaches its engine again")
                self._unreachable.ok()
                self._publisher.retry_now()
            if ended is not None:
                return ended
            self._publish()
            self._pause(self.tuning.poll_seconds)

    def _round(self) -> tuple[State, str] | None:
        """One round: resume a restart a fault cut short, poll, decide, watch; the job's end if it ended.
        Raises ``_Fault`` for a fault the round may be retried for (see the module contract)."""
        try:
            if self._restarting is not None:
                self._resume_restart()
            try:
                exits = decision_order(self._poll())
            except (LaunchError, NotNow):
                raise
            except Exception as exc:  # any fault of a poll: the runtime's own errors are retried
                raise _Fault() from exc
            for index, (name, code) in enumerate(exits):
                run = self._runs[name]
                if run.running:
                    continue  # restarted by an earlier decision of this round
                decision = self.decider.decide(Exited(name, code, self._runs.exited(), self._record.used(), run.error(),
                                                    tuple(run.tail), run.oom_killed))
                if decision.action is Action.RESTART:
                    self._undecided = exits[index + 1:]  # the next round's, should a fault cut this restart short
                    self._restart(decision)
                    self._undecided = []
                elif decision.action is Action.SUCCEED:
                    return State.SUCCEEDED, decision.message
                elif decision.action is Action.FAIL:
                    if run.task.type.trains:
                        self._record.disrupted(Disruption.FAILURE)
                    return State.FAILED, decision.message
            stalled = self._watch.check(self.decider.decide)
        except (_Fault, LaunchError, NotNow):
            raise
        except Exception as exc:
            if engine_fault(exc):
                raise _Fault() from exc
            raise
        return None if stalled is None else self._stalled(stalled)

    def _stalled(self, decision: Decision) -> tuple[State, str] | None:
        """Apply the decision about a stall; the job's end if it fails of it."""
        if decision.action is Action.CONTINUE:  # warn only: the stall's time is lost, nothing is disrupted
            self._record.stalled()
            self._record.job.message = decision.message
            return None
        self._record.disrupted(Disruption.STALL)
        if decision.action is Action.RESTART:
            self._restart(decision)
            return None
        return State.FAILED, decision.message

    def _poll(self) -> list[tuple[str, int]]:
        """The exits left undecided, then those of this poll, in plan order."""
        ended, self._undecided = self._undecided, []
        return ended + self._runs.poll()

    def _restart(self, decision: Decision) -> None:
        runs = [self._runs[name] for name in decision.restart]
        if any(run.task.type.trains for run in runs):
            self._record.disrupted(Disruption.PREEMPTION if decision.preemption else Disruption.FAILURE)
        self._record.restarted(decision, (run.status for run in runs))
        self._set_job(State.RESTARTING, decision.message)
        grace = self.plan.policy.save_grace_seconds if decision.preemption else RESTART_STOP_SECONDS
        self._restarting = _Restart([r for r in runs if r.running], runs, grace)
        self._resume_restart()

    def _resume_restart(self) -> None:
        """Carry the restart under way on: stop what it had not stopped, start what it had not started."""
        restart = self._restarting
        assert restart is not None
        if restart.stop:
            self._runs.stop([r for r in restart.stop if r.running], "stopped for a restart", restart.grace_seconds)
            restart.stop = []
            for run in restart.start:
                run.status.state = State.RESTARTING
            self._publish()
        self._start([r for r in restart.start if not r.running])
        self._restarting = None
        self._record.job.state = State.RUNNING

    def _adopt(self, previous: JobStatus) -> None:
        """Take over the job ``previous`` describes: its counters, progress and clock, and every task's run."""
        self._record.adopted(previous)
        self._watch.adopted(previous.stall)
        while True:  # the runtime bounds how long its engine may be out: past that, its own error ends the job
            try:
                to_start, self._undecided = adopt(previous, self._runs)
                break
            except NotNow as not_now:
                if self._cancelled.is_set():
                    raise
                self._back_off(not_now)
        job = self._record.job
        log(f"adopted {len(self._runs.running())} running task(s) of {self.plan.name}; "
            f"restarts used: {job.restarts}, preemptions: {job.preemptions}")
        self._start(to_start)

    def _back_off(self, not_now: NotNow, longest: float = math.inf) -> None:
        """Pause after the runtime met ``NotNow`` (one line the first time in a row), at most ``longest`` (the time
        left until the deadline: a backed-off round never carries the job past it)."""
        if not self._unreachable.failures:
            log(f"the runtime cannot reach its engine now (rounds back off): {one_line(not_now)}")
        self._pause(min(longest, self._unreachable.failed(not_now.retry_after)))

    def _start(self, runs: Iterable[TaskRun]) -> None:
        runs = list(runs)
        if any(run.task.type.trains for run in runs):
            self._watch.started()
        self._runs.start(runs)
        prepare_standbys(self.runtime, self.plan.tasks)
        self._publish()

    def _on_event(self, run: TaskRun, event: events.Event) -> None:
        self._watch.event(run.task, event)
        self._record.event(run.task, event)

    def _set_job(self, state: State, message: str) -> None:
        """Set the job's state; publish it at once unless it is terminal: ``run`` publishes the end only once the
        tasks still running were stopped, so no status says the job ended while a task of it still runs."""
        self._record.set(state, message)
        if not state.terminal:
            self._publish()

    def _publish(self) -> None:
        self._publisher.publish_changed(self.status())
