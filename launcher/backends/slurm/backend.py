"""The Slurm backend: one allocation per job; inside it tfcluster's supervisor runs the tasks as srun steps.

Contract: ``render`` is the batch script and the plan it reads
(``launcher.backends.slurm.batch_script``); ``submit`` writes them into the job's
``SlurmState`` (on the shared filesystem) and ``sbatch``es the script from
there, returning once Slurm accepted the job (it may wait in the queue; a
job of the same name that Slurm still runs or queues is refused).
``describe`` is the supervisor's status made true by the controller's view
(``launcher.backends.slurm.status``). ``stop`` signals the batch step
(SIGTERM: the supervisor stops every task with the save grace), then
``scancel``s the job and waits, bounded, until Slurm has ended it; ``cancel``
does that and removes the state. The checkpoint dir is created (and marked)
by ``submit`` when missing; ``cancel(volumes=True)`` deletes it only if
tfcluster created it for this cluster and it holds no place the user works
in (``launcher.backends.checkpoints``, every backend's removal guard, asked
before the job is touched: a refusal is ``SpecError`` and nothing is done).
A controller that does not answer is retried, then reported in one line
(``slurmctl``). ``tensorboard`` reads the runs' log dirs with a local
TensorBoard, as the local backend does (the shared filesystem is mounted here).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from launcher.backends import checkpoints, logfiles
from launcher.backends.interface import Backend, BackendOptions
from launcher.backends.logfiles import command_problems
from launcher.backends.slurm import slurmctl, supervise
from launcher.backends.slurm.batch_script import SCRIPT, files
from launcher.backends.slurm.placement import port_block_problems
from launcher.backends.slurm.state import SlurmState
from launcher.backends.slurm.status import describe
from launcher.backends.slurm.target import SlurmTarget
from launcher.backends.tensorboard import Board, planned_log_dirs, serve_locally
from launcher.errors import LaunchError
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.storage import storage_problems
from launcher.plan.targets import BackendKind
from launcher.spec.models import ClusterSpec
from launcher.spec.problems import Problem
from launcher.supervision.statefile import private_dir, write_private
from launcher.supervision.status import JobStatus

#: How long ``stop`` waits for Slurm to end the job, on top of the plan's save grace.
END_TIMEOUT_SECONDS = 60.0
END_POLL_SECONDS = 0.5


class SlurmBackend(Backend[BackendOptions]):
    kind = BackendKind.SLURM

    host = staticmethod(supervise.host)

    @classmethod
    def target(cls, spec: ClusterSpec, *, launching: bool = False) -> SlurmTarget:
        return SlurmTarget(spec)

    @classmethod
    def validate(cls, spec: ClusterSpec) -> list[Problem]:
        """Tasks are processes (an empty ``command`` has no image to run); checkpoints on the shared filesystem
        (``launcher.plan.storage`` with ``SlurmTarget.storage``); the job's port block below 65536."""
        return [*command_problems(spec), *storage_problems(spec, cls.target(spec)), *port_block_problems(spec)]

    @classmethod
    def render(cls, plan: Plan) -> dict[str, str]:
        return files(plan)

    def submit(self, dry_run: DryRun) -> None:
        plan = dry_run.plan
        state = SlurmState.named(plan.name)
        job_id = state.read_job_id() if state.exists() else None
        job = slurmctl.job(job_id) if job_id else None
        if job is not None and not job.ended:
            raise LaunchError(f"cluster {plan.name!r} is Slurm job {job_id}, still {job.state.lower()}; stop it "
                              f"first with `tfcluster down {plan.name}`")
        checkpoints.prepare_for(plan)
        state.create(plan)
        for name, content in dry_run.files.items():
            write_private(state.root / name, content)
        private_dir(state.logs)
        try:
            state.job_id.write_text(slurmctl.submit(SCRIPT, cwd=str(state.root)))
        except BaseException:
            state.remove()
            raise

    def describe(self, name: str) -> JobStatus | None:
        state = SlurmState.named(name)
        if not state.exists():
            return None
        job_id = state.read_job_id()
        job = slurmctl.job(job_id) if job_id else None
        return describe(state.record.read_plan(), state.record.read_status(), state.read_allocation(), job,
                        str(state.batch_log))

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        state = self._existing(name)
        return logfiles.follow(state.record.read_plan(), task, state.task_log, lambda: follow and not self._ended(state))

    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        return serve_locally(planned_log_dirs(self.kind, names), host, port)

    def stop(self, name: str) -> None:
        self._end(self._existing(name))

    def cancel(self, name: str, volumes: bool = False) -> None:
        """End the job and forget it; with ``volumes`` also delete its checkpoint dir, which must be one
        tfcluster created for it (``checkpoints.guard``: else ``SpecError``, and the job is not touched)."""
        state = self._existing(name)
        checkpoint_dir = checkpoints.guard(state.record.read_plan()) if volumes else None
        self._end(state)
        state.remove()
        if checkpoint_dir is not None:
            checkpoints.remove(checkpoint_dir)

    @staticmethod
    def _existing(name: str) -> SlurmState:
        state = SlurmState.named(name)
        if not state.exists():
            raise LaunchError(f"no slurm cluster named {name!r}")
        return state

    @staticmethod
    def _ended(state: SlurmState) -> bool:
        job_id = state.read_job_id()
        job = slurmctl.job(job_id) if job_id else None
        return job is None or job.ended

    def _end(self, state: SlurmState) -> None:
        """SIGTERM the supervisor (it stops the tasks, saving), then cancel the job; return once Slurm ended it."""
        job_id = state.read_job_id()
        job = slurmctl.job(job_id) if job_id else None
        if job_id is None or job is None or job.ended:
            return
        if not job.waiting:
            slurmctl.signal_batch(job_id, "TERM")
            self._await_end(state, state.record.read_plan().policy.save_grace_seconds + END_TIMEOUT_SECONDS)
        if not self._ended(state):
            slurmctl.cancel(job_id)
            if not self._await_end(state, END_TIMEOUT_SECONDS):
                raise LaunchError(f"Slurm has not ended job {job_id} of {state.root.name} in "
                                  f"{END_TIMEOUT_SECONDS:.0f} s; see `squeue -j {job_id}`")

    def _await_end(self, state: SlurmState, timeout: float) -> bool:
        ends = time.monotonic() + timeout
        while not self._ended(state):
            if time.monotonic() >= ends:
                return False
            time.sleep(END_POLL_SECONDS)
        return True
