"""``python -m launcher.backends.slurm.supervise DIR``: the supervisor the batch script runs inside the allocation.

Contract: makes ``DIR/batch.log`` (its own output, which Slurm created
with the job's umask) owner-only, as the tasks' logs are
(``launcher.supervision.statefile``); reads ``DIR/plan.json``, resolves
the allocation's nodes into it (``placement.resolve``), records the ``Allocation``, and supervises the
tasks as srun steps (``steps.StepRuntime``) with the shared
``Supervisor`` and the plan's ``JobPolicy``, writing ``status.json``.

Preemption, Slurm's way: ``USR1`` (the warning ``--signal`` asks for before
the time limit) stops every task with SIGTERM and the save grace (the
coordinated save), then ``scontrol requeue``s the job; SIGTERM (``down``, or
Slurm ending or requeueing the job) stops every task the same way. A
supervisor started in a requeued allocation (``SLURM_RESTART_COUNT`` > 0)
takes the last status over: it counts one preemption (``requeued``), then
starts every task afresh, which resumes from the backup; past
``restart.max_preemptions`` the job fails instead, and a job that had
already succeeded stays so.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

from launcher.backends.slurm import placement, slurmctl
from launcher.backends.slurm.state import BATCH_LOG, Allocation, SlurmState
from launcher.backends.slurm.status import REQUEUEING
from launcher.backends.slurm.steps import StepRuntime
from launcher.errors import TfclusterError
from launcher.plan.targets import BackendKind
from launcher.supervision.statefile import open_private
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor


def requeued(previous: JobStatus) -> JobStatus:
    """The status a requeued job resumes from: one more preemption, every task to be started afresh."""
    tasks = [replace(t, state=State.RESTARTING, exit_code=None, preemptions=t.preemptions + 1,
                     message="requeued: restarting in a new allocation") for t in previous.tasks]
    return replace(previous, state=State.RESTARTING, tasks=tasks, preemptions=previous.preemptions + 1,
                   message="requeued: every task restarts from the backup", supervisor=None)


def serve(root: Path) -> int:
    state = SlurmState(root)
    with open_private(root / BATCH_LOG):
        pass  # tightened: it may hold a task's last lines in a failure message
    plan = state.read_plan()
    job_id = os.environ["SLURM_JOB_ID"]
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    previous = state.read_status() if restarts else None
    state.job_id.write_text(job_id)
    if previous is not None and previous.state is State.SUCCEEDED:
        print(f"{plan.name}: requeued after it had succeeded: nothing to do", flush=True)
        return 0
    try:
        nodes = slurmctl.allocation_nodes(os.environ.get("SLURM_JOB_NODELIST", ""))
        resolved, places = placement.resolve(plan, nodes, job_id, state.port_secret())
    except TfclusterError as exc:
        return _fail(state, plan.name, f"cannot place the tasks: {exc}")
    state.write_allocation(Allocation(job_id=job_id, restarts=restarts, nodes=dict(nodes)))
    resume = None if previous is None else requeued(previous)
    if resume is not None and resume.preemptions > plan.policy.max_preemptions:
        return _fail(state, plan.name,
                     f"preempted {resume.preemptions} times, past restart.max_preemptions "
                     f"({plan.policy.max_preemptions})", resume)
    runtime = StepRuntime(resolved, places, state.logs, job_id)
    warned = threading.Event()

    def publish(status: JobStatus) -> None:
        """After the warning the job is being requeued, not cancelled: never say it ended."""
        if warned.is_set() and status.state is State.CANCELLED:
            status = replace(status, state=State.RESTARTING, message=REQUEUEING)
        state.write_status(status)

    supervisor = Supervisor(resolved, runtime, on_status=publish, on_started=state.started.touch, resume=resume)

    def on_warning(signum: int, frame: object) -> None:
        warned.set()
        supervisor.cancel()

    signal.signal(signal.SIGUSR1, on_warning)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: supervisor.cancel())
    job = supervisor.run()
    runtime.close()
    if warned.is_set() and job.state is State.CANCELLED:
        publish(job)
        print(f"{plan.name}: warned by Slurm: requeueing job {job_id}", flush=True)
        try:
            slurmctl.requeue(job_id)
        except TfclusterError as exc:
            return _fail(state, plan.name, f"warned by Slurm, every task saved, but the job could not be requeued: "
                                           f"{exc}", job)
        return 0
    print(f"{plan.name}: {job.state.value}: {job.message}", flush=True)
    return 0 if job.state is State.SUCCEEDED else 1


def _fail(state: SlurmState, name: str, message: str, base: JobStatus | None = None) -> int:
    job = base or JobStatus(name, BackendKind.SLURM, State.FAILED)
    state.write_status(replace(job, state=State.FAILED, message=f"failed: {message}"))
    print(f"{name}: failed: {message}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1])))
