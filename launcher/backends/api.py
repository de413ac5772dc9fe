"""The backend interface (shaped after TorchX's schedulers): render, submit, describe, logs, cancel.

Contract: a backend applies a ``Plan``; it never re-derives tasks or
TF_CONFIGs. ``submit`` either leaves a running cluster that ``describe`` can
find by name, or cleans up everything it started and raises ``LaunchError``.
``describe`` returns None for a cluster it does not know. Backends import
their SDKs (docker, kubernetes) lazily so the CLI stays fast.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from launcher.plan import Plan
from launcher.targets import BackendKind


class LaunchError(RuntimeError):
    """A launch failed; whatever it had started is already cleaned up. The message says why."""


class BackendUnavailable(RuntimeError):
    """The backend's runtime (Docker, Compose v2, a kubeconfig) is missing; the message says what to install."""


class State(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self in (State.SUCCEEDED, State.FAILED, State.CANCELLED)


@dataclass
class TaskStatus:
    name: str
    state: State
    restarts: int = 0
    exit_code: int | None = None
    message: str = ""


@dataclass
class JobStatus:
    """A cluster as a backend sees it. ``progress`` is the latest training event (see launcher.events)."""

    name: str
    backend: BackendKind
    state: State
    tasks: list[TaskStatus] = field(default_factory=list)
    message: str = ""
    restarts: int = 0
    progress: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (enums as their values): ``status -o json`` and the backends' state files."""
        document = asdict(self)
        document["backend"] = self.backend.value
        document["state"] = self.state.value
        for task in document["tasks"]:
            task["state"] = task["state"].value
        return document

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobStatus":
        """The inverse of ``to_dict``."""
        tasks = [TaskStatus(**{**t, "state": State(t["state"])}) for t in data["tasks"]]
        return cls(**{**data, "backend": BackendKind(data["backend"]), "state": State(data["state"]), "tasks": tasks})


class Backend(ABC):
    kind: BackendKind

    def render(self, plan: Plan) -> dict[str, str]:
        """Files this backend would apply (name -> content). Pure; empty for backends without files."""
        return {}

    @abstractmethod
    def submit(self, plan: Plan) -> None:
        """Start the cluster and return once it is started (supervision goes on without the caller)."""

    def supervise(self, name: str) -> list[str]:
        """One supervision step of a watching launcher (``launcher.watch`` calls it before each ``describe``).

        For backends whose runtime supervises only part of the policy (Kubernetes);
        returns one line per action taken. The default does nothing.
        """
        return []

    def supervises_only_when_watched(self, plan: Plan) -> bool:
        """True if part of ``plan``'s supervision runs only while someone watches (``supervise``)
        and nothing else bounds the run; ``up --detach`` warns then. The default: False."""
        return False

    @abstractmethod
    def describe(self, name: str) -> JobStatus | None:
        """Current status of cluster ``name``, or None if this backend has no such cluster."""

    @abstractmethod
    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        """Log lines of one task, or of all tasks prefixed with the task name."""

    def stop(self, name: str) -> None:
        """Stop every task of ``name`` after Ctrl-C, keeping what ``status``/``logs`` need where the
        backend can (``down`` removes it). The default is ``cancel``."""
        self.cancel(name)

    @abstractmethod
    def cancel(self, name: str, volumes: bool = False) -> None:
        """Stop and remove everything of cluster ``name`` (checkpoints stay unless ``volumes``)."""
