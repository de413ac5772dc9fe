"""The local backend: every task is a process on this machine, on loopback ports.

Contract: ``submit`` creates the cluster's ``StateDir`` (``naming.state_dir("local", NAME)``) and starts the
shared detached supervisor with local processes (``launcher.backends.local.supervise``, its ``host``); it
returns once the tasks are started, and a task that cannot start fails it (nothing is left). A cluster whose
supervisor still runs cannot be submitted again. Task logs are ``logs/<task>.log`` there, kept after the job
ends and removed by ``cancel``. The checkpoint dir is created (and marked) by ``submit`` when missing and kept
by ``cancel``; ``cancel(volumes=True)`` deletes it only if tfcluster created it for this cluster and it holds no
place the user works in (``launcher.backends.checkpoints``). ``cancel`` stops the supervisor (which stops the
tasks), then kills every recorded process group that still runs one of the cluster's tasks. ``describe`` reads
the tasks from their processes and exit files when the supervisor is gone; ``adopt`` (each round of ``watch``)
then starts a supervisor that adopts them. ``tensorboard`` serves the runs' log dirs with a local TensorBoard.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from launcher.backends import checkpoints, logfiles, supervisor_process
from launcher.backends.interface import Backend, BackendOptions
from launcher.backends.local import supervise
from launcher.backends.local.capacity import memory_problems
from launcher.backends.local.processes import ProcessRuntime, group_runs_task, kill_group_and_wait, read_exits
from launcher.backends.local.state import LocalState
from launcher.backends.local.target import LocalTarget, target
from launcher.backends.logfiles import command_problems
from launcher.backends.tensorboard import Board, planned_log_dirs, serve_locally
from launcher.errors import LaunchError
from launcher.plan.dryrun import DryRun
from launcher.plan.storage import storage_problems
from launcher.plan.targets import BackendKind
from launcher.spec.models import ClusterSpec
from launcher.spec.problems import Problem
from launcher.supervision import harness
from launcher.supervision.debug import stacks_now
from launcher.supervision.statefile import private_dir
from launcher.supervision.status import JobStatus


class LocalBackend(Backend[BackendOptions]):
    kind = BackendKind.LOCAL

    host = staticmethod(supervise.host)

    @classmethod
    def target(cls, spec: ClusterSpec, *, launching: bool = False) -> LocalTarget:
        return target(spec, launching=launching)

    @classmethod
    def capacity(cls, spec: ClusterSpec) -> list[Problem]:
        return memory_problems(spec)

    @classmethod
    def validate(cls, spec: ClusterSpec) -> list[Problem]:
        """A process needs a program: an empty role ``command`` (the image's own) runs only in containers; the
        checkpoint and log dirs a directory of the run's own (``launcher.plan.storage``)."""
        return [*command_problems(spec), *storage_problems(spec, cls.target(spec))]

    def submit(self, dry_run: DryRun) -> None:
        plan = dry_run.plan
        state = LocalState.of(self.kind, plan.name)
        if state.supervisor() is not None:
            raise LaunchError(f"cluster {plan.name!r} is already running locally; stop it first with "
                              f"`tfcluster down {plan.name}`")
        checkpoints.prepare_for(plan)
        state.create(plan)
        private_dir(state.logs)

        def undo() -> None:
            self._teardown(state)
            state.remove()

        harness.launch(state, supervisor_process.process(type(self)), undo)

    def describe(self, name: str) -> JobStatus | None:
        state = LocalState.of(self.kind, name)
        return harness.describe(state, self.kind, lambda plan: read_exits(state.read_runs(), state.exits))

    def adopt(self, name: str) -> list[str]:
        """Adopt the tasks of ``name`` with a new supervisor if its supervisor died."""
        return harness.adopt(LocalState.of(self.kind, name), supervisor_process.process(type(self)))

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        state = self._existing(name)
        return logfiles.follow(state.record.read_plan(), task, state.task_log,
                               lambda: follow and state.supervisor() is not None)

    def stacks(self, name: str) -> dict[str, str | None]:
        """Through a runtime that attaches to the recorded runs and records nothing (the supervisor may run)."""
        state = self._existing(name)
        plan = state.record.read_plan()
        return stacks_now(ProcessRuntime(plan, state.logs, state.exits, recorded=state.read_runs()), plan)

    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        """TensorBoard as a child process reading the runs' log dirs directly."""
        return serve_locally(planned_log_dirs(self.kind, names), host, port)

    def stop(self, name: str) -> None:
        """Stop the supervisor and every task; the plan, status and logs stay for ``status``/``logs``."""
        self._teardown(self._existing(name))

    def cancel(self, name: str, volumes: bool = False) -> None:
        """Stop and forget cluster ``name``; with ``volumes`` also delete its checkpoint dir, which must be one
        tfcluster created for it (``checkpoints.guard``: else ``SpecError``, and nothing is done)."""
        state = self._existing(name)
        checkpoint_dir = checkpoints.guard(state.record.read_plan()) if volumes else None
        self._teardown(state)
        state.remove()
        if checkpoint_dir is not None:
            checkpoints.remove(checkpoint_dir)

    def _existing(self, name: str) -> LocalState:
        state = LocalState.of(self.kind, name)
        if not state.exists():
            raise LaunchError(f"no local cluster named {name!r}")
        return state

    @staticmethod
    def _teardown(state: LocalState) -> None:
        """Stop the supervisor (it stops its tasks), then kill whatever is left and wait until it is torn down
        (its ports free for the next ``up``)."""
        harness.stop(state)
        for task_name, pgid in state.read_groups().items():
            if group_runs_task(pgid, task_name):
                kill_group_and_wait(pgid)
