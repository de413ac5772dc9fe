"""The Slurm job's part of the supervisor process its batch step runs (``launcher.supervision.harness``).

Contract: ``host`` makes ``DIR/batch.log`` (the process's own output, which
Slurm created with the job's umask) owner-only, as the tasks' logs are
(``launcher.supervision.statefile``); records the job id, resolves the
allocation's nodes into the plan (``placement.resolve``), records the
``Allocation``, and gives the harness the tasks as srun steps
(``steps.StepRuntime``). The harness supervises them with the shared
``Supervisor``, handles the signals and writes every status.

Preemption, Slurm's way: ``USR1`` (the warning ``--signal`` asks for before
the time limit) is the harness's ``Notice``: every task stops with SIGTERM and
the save grace (the coordinated save), then ``scontrol requeue``s the job;
SIGTERM (``down``, or Slurm ending or requeueing the job) stops every task the
same way. A process started in a requeued allocation (``SLURM_RESTART_COUNT`` >
0) takes the last status over: it counts one preemption (``requeued``), then
starts every task afresh, which resumes from the backup; past
``restart.max_preemptions`` the job fails instead, and a job that had already
succeeded stays so.
"""

from __future__ import annotations

import os
import signal
from dataclasses import replace

from launcher.backends.slurm import placement, slurmctl
from launcher.backends.slurm.state import Allocation, SlurmState
from launcher.backends.slurm.status import REQUEUEING
from launcher.backends.slurm.steps import StepRuntime
from launcher.errors import TfclusterError
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.statefile import open_private
from launcher.supervision.status import JobStatus, State


def requeued(previous: JobStatus) -> JobStatus:
    """The status a requeued job resumes from: one more preemption, every task to be started afresh."""
    tasks = [replace(t, state=State.RESTARTING, exit_code=None, preemptions=t.preemptions + 1,
                     message="requeued: restarting in a new allocation") for t in previous.tasks]
    return replace(previous, state=State.RESTARTING, tasks=tasks, preemptions=previous.preemptions + 1,
                   message="requeued: every task restarts from the backup", supervisor=None)


def host(plan: Plan, dir_: harness.StateDir, adopt: bool) -> harness.Hosted:
    """The srun steps of ``plan`` in this allocation (``adopt`` is unused: a requeue is Slurm's takeover)."""
    state = SlurmState(dir_.root)
    with open_private(state.batch_log):
        pass  # tightened: it may hold a task's last lines in a failure message
    job_id = os.environ["SLURM_JOB_ID"]
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    previous = state.read_status() if restarts else None
    state.job_id.write_text(job_id)
    if previous is not None and previous.state is State.SUCCEEDED:
        raise harness.NothingToDo("requeued after it had succeeded: nothing to do")
    try:
        nodes = slurmctl.allocation_nodes(os.environ.get("SLURM_JOB_NODELIST", ""))
        resolved, places = placement.resolve(plan, nodes, job_id, state.port_secret())
    except TfclusterError as exc:
        raise harness.CannotRun(f"cannot place the tasks: {exc}") from None
    state.write_allocation(Allocation(job_id=job_id, restarts=restarts, nodes=dict(nodes)))
    resume = None if previous is None else requeued(previous)
    if resume is not None and resume.preemptions > plan.policy.max_preemptions:
        raise harness.CannotRun(f"preempted {resume.preemptions} times, past restart.max_preemptions "
                                f"({plan.policy.max_preemptions})", resume)
    notice = harness.Notice(signal.SIGUSR1, message=REQUEUEING, said=f"warned by Slurm: requeueing job {job_id}",
                            then=lambda: slurmctl.requeue(job_id),
                            failed="warned by Slurm, every task saved, but the job could not be requeued")
    return harness.Hosted(resolved, StepRuntime(resolved, places, state.logs, job_id, restarts), resume=resume, notice=notice)
