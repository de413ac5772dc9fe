"""The job's own account as the supervisor keeps it: state, counters, progress, stragglers and goodput.

Contract: ``JobRecord(plan)`` holds the job's ``JobStatus`` (its tasks' statuses come from the ``TaskRun``s)
and its goodput ``Ledger``. ``event`` folds a task's event into the progress (the lead's, or what counts from
any task), the stragglers (training tasks' step times, the last ``stragglers.WINDOW``) and the ledger;
``disrupted``/``stalled`` record lost time; ``restarted`` counts a restart decision (a preemption apart) on the
job and on each task restarted; ``launched`` and ``adopted`` start the account (``adopted``: another supervisor's,
carried on); ``set`` changes the state, stamping the end once; ``status(tasks)`` is a snapshot sharing nothing
mutable, its goodput as of now (or of the end).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from launcher.plan.planner import Plan, Task
from launcher.protocol import events
from launcher.protocol.progress import counts, progress, seed
from launcher.supervision.goodput import Disruption, Ledger
from launcher.supervision.rules import Decision, Used
from launcher.supervision.status import JobStatus, StallStatus, State, TaskStatus
from launcher.supervision.stragglers import WINDOW as STRAGGLER_WINDOW
from launcher.supervision.stragglers import StepBreakdown, stragglers


class JobRecord:
    """See the module contract."""

    def __init__(self, plan: Plan, watching: bool):
        self.job = JobStatus(plan.name, plan.backend, State.PENDING, progress=seed(plan.run_config),
                             tensorboard_dir=plan.run_config.tensorboard_dir, stall=StallStatus(watching=watching))
        self._lead = plan.lead().name
        every = plan.run_config.backup_every_steps
        self._backup_every = every if isinstance(every, int) else None
        self._ledger = Ledger.launched(time.time(), self._backup_every)
        self._step_times: dict[str, list[StepBreakdown]] = {}
        self._ended_at: float | None = None

    @property
    def stall(self) -> StallStatus:
        assert self.job.stall is not None
        return self.job.stall

    def used(self) -> Used:
        return Used(self.job.restarts, self.job.preemptions)

    def launched(self) -> None:
        self.job.started_at = time.time()
        self._ledger = Ledger.launched(self.job.started_at, self._backup_every)

    def adopted(self, previous: JobStatus) -> None:
        """Carry on ``previous``'s counters, progress, clock and goodput (its stall status: ``StallWatch``)."""
        self.job.restarts = previous.restarts
        self.job.preemptions = previous.preemptions
        self.job.started_at = previous.started_at or time.time()
        self._ledger = (Ledger.launched(self.job.started_at, self._backup_every) if previous.goodput is None else
                        Ledger.resumed(previous.goodput, self.job.started_at, previous.progress.step,
                                       self._backup_every))
        self.job.progress = previous.progress

    def event(self, task: Task, event: events.Event) -> None:
        from_lead = task.name == self._lead
        if isinstance(event, events.StepTime) and task.type.trains:
            times = self._step_times.setdefault(task.name, [])
            times[:] = [*times, StepBreakdown.of(event)][-STRAGGLER_WINDOW:]
            self.job.stragglers = stragglers(self._step_times)
        if counts(event, from_lead=from_lead):
            self.job.progress = progress(self.job.progress, event)
        self._ledger = self._ledger.event(event, from_lead=from_lead)

    def disrupted(self, kind: Disruption) -> None:
        self._ledger = self._ledger.disrupted(kind, time.time())

    def stalled(self) -> None:
        """A stall only warned of: its time is lost, nothing is disrupted."""
        self._ledger = self._ledger.stalled(time.time())

    def restarted(self, decision: Decision, tasks: Iterable[TaskStatus]) -> None:
        for task in tasks:
            if decision.preemption:
                task.preemptions += 1
            else:
                task.restarts += 1
        if decision.preemption:
            self.job.preemptions += 1
        else:
            self.job.restarts += 1

    def set(self, state: State, message: str) -> None:
        if state.terminal and self._ended_at is None:
            self._ended_at = time.time()
        self.job.state = state
        self.job.message = message

    def status(self, tasks: Iterable[TaskStatus]) -> JobStatus:
        job = self.job
        stall = None if job.stall is None else replace(job.stall, suspects=list(job.stall.suspects))
        now = self._ended_at if self._ended_at is not None else time.time()
        return replace(job, tasks=[replace(t) for t in tasks], stall=stall, stragglers=list(job.stragglers),
                       goodput=self._ledger.goodput(now))
