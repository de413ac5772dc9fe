"""The backend interface (shaped after TorchX's schedulers): validate, dry-run, submit, describe, logs, cancel.

Contract: a backend is one package under ``launcher.backends`` whose ``Backend`` subclass answers
``target``, ``validate`` (located ``Problem``s) and ``dry_run`` purely, without touching a runtime.
An instance (``create``) applies a ``DryRun`` with ``submit`` exactly as rendered, never re-deriving
tasks, TF_CONFIGs or policies; ``submit`` leaves a running cluster ``describe`` finds by name, or
removes what it started and raises ``LaunchError``. ``describe`` returns None for an unknown cluster.
``tensorboard`` serves the runs' log dirs, ``capacity`` is checked by ``up``, ``history`` feeds ``report``.
SDKs and TensorBoard are imported lazily. How to add a backend:
docs/architecture.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from launcher.backends.tensorboard import Board
from launcher.errors import LaunchError
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind, Target
from launcher.spec.models import ClusterSpec
from launcher.spec.problems import Problem
from launcher.supervision.harness import Hosted, StateDir
from launcher.supervision.history import RunHistory
from launcher.supervision.status import JobStatus, SupervisorState


class BackendOptions(BaseModel):
    """How to reach a backend's runtime, as the user gave it (``--namespace``, ...) and ``up`` recorded it.

    A backend with options declares a subclass as its ``Options`` (e.g.
    ``KubernetesOptions``: namespace, context) and takes it in ``create``;
    ``launcher.backends.get_backend`` validates what it is given into it
    (unknown options are refused). This base has none.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


OptionsT = TypeVar("OptionsT", bound=BackendOptions)


class Backend(ABC, Generic[OptionsT]):
    kind: ClassVar[BackendKind]
    #: The model of this backend's options (``create``'s argument).
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    # -- pure: no runtime needed ---------------------------------------------------------------

    @classmethod
    @abstractmethod
    def target(cls, spec: ClusterSpec, *, launching: bool = False) -> Target:
        """How tasks are addressed; ``launching`` may reserve real resources (local: free ports)."""

    @classmethod
    def validate(cls, spec: ClusterSpec) -> list[Problem]:
        """Problems of a field-valid ``spec`` that only this backend has (none by default)."""
        return []

    @classmethod
    def capacity(cls, spec: ClusterSpec) -> list[Problem]:
        """Problems launching ``spec`` would clearly meet on this machine (local: memory); none by default."""
        return []

    @classmethod
    def render(cls, plan: Plan) -> dict[str, str]:
        """Files this backend applies (name -> content); empty for backends without files."""
        return {}

    @classmethod
    def dry_run(cls, plan: Plan) -> DryRun:
        return DryRun(plan=plan, files=cls.render(plan))

    @classmethod
    def host(cls, plan: Plan, state: StateDir, adopt: bool) -> Hosted:
        """The runtime the one supervisor process (``launcher.supervision.harness``) drives
        for ``plan``, whose ``StateDir`` is ``state`` (``adopt``: taking over a dead supervisor's tasks); only
        backends that run that process have one (local, compose, Slurm: their ``supervise.host``, as a
        ``staticmethod``; Kubernetes). ``launcher.backends.supervisor_process`` calls it on the class."""
        raise LaunchError(f"{cls.kind.value} runs no tfcluster supervisor process")

    @classmethod
    def state_of(cls, target: str) -> StateDir:
        """The ``StateDir`` the supervisor process's command line names (``launcher.backends.supervisor_process``):
        by default the directory ``target`` on this machine, keeping the run's record in its files; a backend may
        keep the record elsewhere (its ``record``: Kubernetes, the run's ConfigMap)."""
        return StateDir(Path(target))

    # -- needs the runtime --------------------------------------------------------------------

    @classmethod
    def create(cls, options: OptionsT) -> Backend[OptionsT]:
        """A backend connected to its runtime, as ``options`` say."""
        return cls()

    def fit(self, dry_run: DryRun) -> DryRun:
        """The dry run ``submit`` is to apply on this backend's runtime, decided before anything is applied:
        ``dry_run`` itself by default; a backend may plan it again for what its runtime serves (Kubernetes: without
        the gang on a cluster that serves no PodGroups), saying so in one line."""
        return dry_run

    @abstractmethod
    def submit(self, dry_run: DryRun) -> None:
        """Start the cluster exactly as ``dry_run`` shows it; return once every task is started."""

    def adopt(self, name: str) -> list[str]:
        """If the detached supervisor of ``name`` died, start one that takes its tasks over (local, compose:
        ``launcher.supervision.harness.adopt``); one line per action taken. ``launcher.cli.watch`` calls it
        before each ``describe``. The default (no detached supervisor here) does nothing."""
        return []

    @abstractmethod
    def describe(self, name: str) -> JobStatus | None:
        """Current status of cluster ``name``, or None if this backend has no such cluster."""

    def over(self, name: str) -> bool:
        """Whether run ``name`` has ended (``describe`` says so), is gone, or has lost its supervisor (no task
        runs anew until ``watch`` adopts it): where ``logs -f`` stops following (after what is left to show) on
        backends that follow task runs, not one log file (compose, Kubernetes), as it stops with the supervisor
        on the others, instead of waiting for runs that never come."""
        status = self.describe(name)
        return status is None or status.state.terminal or status.supervisor is SupervisorState.LOST

    @abstractmethod
    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        """Log lines of one task, or of all tasks prefixed with the task name."""

    @abstractmethod
    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        """Serve TensorBoard for runs ``names`` (side by side) at ``http://host:port/``.

        Entering the context returns once TensorBoard answers; leaving it stops
        TensorBoard and removes what was started for it. Raises ``LaunchError``
        for an unknown run or one whose TensorBoard is off.
        """

    def history(self, name: str) -> RunHistory | None:
        """The run's plan, status and every task's events (None if this backend has no such cluster).

        The default: the plan the cluster's ``StateDir`` keeps, and each task's events from ``logs``."""
        status = self.describe(name)
        state = StateDir.of(self.kind, name)
        if status is None or not state.exists():
            return None
        return RunHistory.read(state.record.read_plan(), status.to_dict(), lambda task: self.logs(name, task))

    def stacks(self, name: str) -> dict[str, str | None]:
        """The Python stacks of every running task's threads, now (``launcher.supervision.debug``);
        None for a task that cannot dump them. Raises ``LaunchError`` where the backend cannot."""
        raise LaunchError(f"`debug` is not available on {self.kind.value}; see docs/cli.md (tfcluster debug)")

    def stop(self, name: str) -> None:
        """Stop every task of ``name`` after Ctrl-C, keeping what ``status``/``logs`` need where the
        backend can (``down`` removes it). The default is ``cancel``."""
        self.cancel(name)

    @abstractmethod
    def cancel(self, name: str, volumes: bool = False) -> None:
        """Stop and remove everything of cluster ``name`` (checkpoints stay unless ``volumes``)."""
