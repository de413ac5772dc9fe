"""Slurm preemption, in one place: how a Slurm job is warned, preempted, counted and resumed.

Contract: Slurm preempts the whole job, never one task, in three moments, each handled here only:

1. The warning (``notice``): ``USR1``, which the batch script's ``--signal`` asks for before the time limit or a
   preemption, is the harness's ``Notice``: every task stops with SIGTERM and the save grace (the coordinated save),
   the status says ``REQUEUEING``, then ``scontrol requeue`` runs. SIGTERM (``down``, or Slurm ending or requeueing
   the job) stops every task the same way (the harness).
2. The steps' ends (``AllocationWatch``): Slurm signals the steps and the batch step together, so a step that ends
   while Slurm ends its allocation (requeued, cancelled, timed out: the job no longer ``RUNNING`` in this
   allocation's restart count) ended with it, not by itself: ``StepRuntime.poll`` reads it as running, so the
   supervisor never takes it for a task's own preemption before its SIGTERM arrives (a requeue counted twice). A
   success is asked about too: the srun of a step on a lost node exits 0. One ``scontrol`` call per step end, the
   verdict kept; while the controller does not answer (busy with that very node failure), the step reads as running
   for up to ``SILENT_CONTROLLER_SECONDS``, asked again at each poll; past that its code counts as it is.
   A SIGTERM with no warning before it (an administrator's ``scontrol requeue``) is a requeue when the job's restart
   count rose (``handed_on``): the ending supervisor then says the job restarts, never that it was cancelled.
3. The requeued allocation (``resume``): its supervisor process (``SLURM_RESTART_COUNT`` > 0) takes the last
   status over as one preemption of every task (``requeued``), all started afresh (they resume from the backup),
   when the supervisor's decisions allow it (``Decider.decide(Requeued(...))``: the one preemption budget,
   ``restart.max_preemptions``); past it the job fails before any task starts (``harness.CannotRun``), and a job
   that had already succeeded stays so (``over``: ``harness.NothingToDo``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace

from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.status import REQUEUED, REQUEUEING
from launcher.errors import TfclusterError
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.decisions import Action, Decider, Requeued, Used
from launcher.supervision.status import JobStatus, State

#: How long an ended step reads as running while the controller cannot say whether its allocation is ending.
SILENT_CONTROLLER_SECONDS = 60.0


def notice(job_id: str) -> harness.Notice:
    """Slurm's warning: every task saves, then job ``job_id`` is requeued (see the module contract)."""
    return harness.Notice(signal.SIGUSR1, message=REQUEUEING, said=f"warned by Slurm: requeueing job {job_id}",
                          then=lambda: slurmctl.requeue(job_id),
                          failed="warned by Slurm, every task saved, but the job could not be requeued")


class AllocationWatch:
    """Whether Slurm is ending allocation ``restarts`` of job ``job_id`` (see the module contract)."""

    def __init__(self, job_id: str, restarts: int):
        self.job_id = job_id
        self.restarts = restarts  # Slurm's restart count of this allocation (SLURM_RESTART_COUNT)
        self._ending = False
        self._silent_since: float | None = None

    def ending(self) -> bool:
        """True once Slurm is ending this allocation, and while the controller has been silent for less than
        ``SILENT_CONTROLLER_SECONDS``."""
        if not self._ending:
            try:
                job = slurmctl.job(self.job_id, retries=1)
            except TfclusterError:
                now = time.monotonic()
                self._silent_since = now if self._silent_since is None else self._silent_since
                return now - self._silent_since < SILENT_CONTROLLER_SECONDS
            self._silent_since = None
            self._ending = job is None or not job.running or job.restarts > self.restarts
        return self._ending


def handed_on(job_id: str, restarts: int) -> Callable[[], str | None]:
    """Whether job ``job_id``, whose allocation ``restarts`` a SIGTERM is ending, was requeued (an administrator's
    ``scontrol requeue``, Slurm's preemption by requeue): its restart count rose. Then its supervisor says it
    restarts (``REQUEUED``), never that it was cancelled: the next allocation's supervisor may have written its
    status already. A controller that does not answer: not known to be requeued (cancelled, as before)."""

    def requeued() -> str | None:
        try:
            job = slurmctl.job(job_id, retries=1)
        except TfclusterError:
            return None
        return REQUEUED if job is not None and job.restarts > restarts else None

    return requeued


def requeued(previous: JobStatus) -> JobStatus:
    """The status a requeued job resumes from: one more preemption, every task to be started afresh."""
    tasks = [replace(t, state=State.RESTARTING, exit_code=None, preemptions=t.preemptions + 1,
                     message="requeued: restarting in a new allocation") for t in previous.tasks]
    return replace(previous, state=State.RESTARTING, tasks=tasks, preemptions=previous.preemptions + 1,
                   message="requeued: every task restarts from the backup", supervisor=None)


def over(previous: JobStatus | None) -> None:
    """Raise ``harness.NothingToDo`` if the job was requeued after it had succeeded (asked before anything else)."""
    if previous is not None and previous.state is State.SUCCEEDED:
        raise harness.NothingToDo("requeued after it had succeeded: nothing to do")


def resume(plan: Plan, previous: JobStatus | None) -> JobStatus | None:
    """The status a requeued allocation's supervisor carries on from (None: the job's first allocation); raises
    ``harness.CannotRun`` past the preemption budget (see the module contract; asked once the allocation is
    recorded, so that the failure is this allocation's)."""
    if previous is None:
        return None
    decision = Decider.from_plan(plan).decide(Requeued(Used(previous.restarts, previous.preemptions)))
    if decision.action is not Action.RESTART:
        raise harness.CannotRun(decision.message, requeued(previous))
    return replace(requeued(previous), message=decision.message)
