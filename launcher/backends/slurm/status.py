"""What ``status`` says of a Slurm job: the supervisor's status, made true by what the controller says.

Contract: ``describe(plan, written, allocation, job)`` is pure. ``written`` is
the status the in-allocation supervisor wrote (None before it wrote one),
``allocation`` the allocation it wrote it in, ``job`` the controller's view
(None once the controller forgot the job). A job waiting for an allocation is
``pending`` (``restarting`` once an earlier allocation ran it: requeued);
a running allocation whose supervisor has not written yet, or wrote in an
earlier allocation, is starting its tasks; an allocation that ended while
the written status is not terminal ended without its supervisor finishing:
the job is ``failed`` (``cancelled`` if Slurm cancelled it), never
``running``, and every unfinished task with it, unless its supervisor said it
requeues the job (``REQUEUEING``) or that Slurm requeued it (``REQUEUED``), which the controller may show as
ended for a moment.
"""

from __future__ import annotations

from dataclasses import replace

from launcher.backends.slurm.slurmctl import SlurmJob
from launcher.backends.slurm.state import Allocation
from launcher.plan.planner import Plan
from launcher.supervision.status import JobStatus, State, SupervisorState, TaskStatus

#: What the supervisor says once Slurm's warning came: it stops every task (saving), then requeues the job.
REQUEUEING = "Slurm's warning (time limit or preemption): every task saves, then the job is requeued"
#: What the supervisor of an allocation Slurm ended by a requeue says last (``preemption.handed_on``).
REQUEUED = "requeued by Slurm: every task saved; the next allocation restarts them from the backup"


def describe(plan: Plan, written: JobStatus | None, allocation: Allocation | None, job: SlurmJob | None,
             batch_log: str) -> JobStatus:
    base = written or JobStatus(plan.name, plan.backend, State.PENDING,
                                tasks=[TaskStatus(t.name, State.PENDING) for t in plan.tasks],
                                tensorboard_dir=plan.run_config.tensorboard_dir)
    stale = job is not None and (allocation is None or job.restarts > allocation.restarts)
    if job is not None and job.waiting:
        state = State.RESTARTING if written is not None else State.PENDING
        what = "requeued: waiting for a new allocation" if written is not None else "waiting for an allocation"
        return replace(base, state=state, message=f"{what} ({job.reason or job.state})", supervisor=None)
    if job is not None and not job.ended:
        if written is None or stale:
            if written is None:
                return replace(base, supervisor=SupervisorState.ALIVE,
                               message=f"allocation on {job.nodes}: the supervisor is starting the tasks")
            return replace(base, state=State.RESTARTING, supervisor=None,
                           message=f"requeued (Slurm restart {job.restarts}): job {job.state.lower()} on {job.nodes}, "
                                   "every task restarts from the backup in the new allocation")
        return replace(base, supervisor=SupervisorState.EXITED if base.state.terminal else SupervisorState.ALIVE)
    if written is not None and written.state.terminal and not stale:
        return replace(base, supervisor=SupervisorState.EXITED)
    if written is not None and written.message in (REQUEUEING, REQUEUED) and job is not None and job.state != "CANCELLED":
        # The controller is requeueing it: it may show the job ended for a moment, its restart already counted.
        return replace(base, state=State.RESTARTING, supervisor=None)
    ended = State.CANCELLED if job is not None and job.state == "CANCELLED" else State.FAILED
    how = f"ended {job.state}" if job is not None else "is no longer known to the controller"
    tasks = [t if t.state.terminal else replace(t, state=ended) for t in base.tasks]
    return replace(base, state=ended, tasks=tasks, supervisor=SupervisorState.LOST,
                   message=f"{ended.value}: the allocation {how} while the job was {base.state.value}; "
                           f"its supervisor did not finish (see {batch_log})")
