"""The Slurm job's part of the supervisor process its batch step runs (``launcher.supervision.harness``).

Contract: ``host`` makes ``DIR/batch.log`` (the process's own output, which
Slurm created with the job's umask) owner-only, as the tasks' logs are
(``launcher.supervision.statefile``); records the job id, resolves the
allocation's nodes into the plan (``placement.resolve``; a port block with a
port in use on this node gives way to a free one: ``ports.in_use``), records the
``Allocation``, and gives the harness the tasks as srun steps
(``steps.StepRuntime``). The harness supervises them with the shared
``Supervisor``, handles the signals and writes every status.

Preemption, Slurm's way (the warning, the steps' ends, the requeue and its budget): ``preemption``.
"""

from __future__ import annotations

import os

from launcher.backends import ports
from launcher.backends.slurm import placement, preemption, slurmctl
from launcher.backends.slurm.state import Allocation, SlurmState
from launcher.backends.slurm.steps import StepRuntime
from launcher.errors import TfclusterError
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.statefile import open_private


def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
    """The srun steps of ``plan`` in this allocation (``adopt`` is unused: a requeue is Slurm's takeover)."""
    slurm = SlurmState(state.root)
    with open_private(slurm.batch_log):
        pass  # tightened: it may hold a task's last lines in a failure message
    job_id = os.environ["SLURM_JOB_ID"]
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    previous = state.record.read_status() if restarts else None
    slurm.job_id.write_text(job_id)
    preemption.over(previous)
    try:
        nodes = slurmctl.allocation_nodes(os.environ.get("SLURM_JOB_NODELIST", ""))
        resolved, places = placement.resolve(plan, nodes, job_id, slurm.port_secret(), ports.in_use)
    except TfclusterError as exc:
        raise harness.CannotRun(f"cannot place the tasks: {exc}") from None
    slurm.write_allocation(Allocation(job_id=job_id, restarts=restarts, nodes=dict(nodes)))
    resume = preemption.resume(plan, previous)
    return harness.Hosted(resolved, StepRuntime(resolved, places, slurm.logs, job_id, restarts), resume=resume,
                          notice=preemption.notice(job_id), handed_back=preemption.handed_on(job_id, restarts))
