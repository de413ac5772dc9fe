"""What ``status`` reports: the job's state and each task's, as every backend describes them.

Contract: ``JobStatus.to_dict`` is the ``status -o json`` document and the
form the detached supervisor writes to disk; ``from_dict`` is its inverse.
``progress`` is the job's training progress, folded from its tasks' events
(``launcher.protocol.job_progress``), with every field on every backend; ``tensorboard_dir`` is the run's TensorBoard
log dir as its tasks see it (None: summaries off, or unknown). ``supervisor``
says whether the detached supervisor of a local or compose cluster runs (None
for backends without one); ``started_at`` is when the job first started (unix
seconds), so a supervisor that adopts the tasks measures the deadline from there.
``stall`` is the stall watchdog's view (``StallStatus``); ``stragglers`` the training tasks
slower than the others, with their numbers. ``goodput`` is where the run's time went
(``launcher.supervision.goodput.Goodput``; None where nothing accounts it), kept after the run ended.
``abridged(chars)`` is the status with each of its free texts (messages, last lines, the stall's lines) cut to
``chars`` characters by ``clipped``, which marks a cut with ``CLIP_MARK``: what a store of bounded size keeps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

from launcher.plan.targets import BackendKind
from launcher.protocol.job_progress import JobProgress
from launcher.supervision.goodput import Goodput
from launcher.supervision.stall import StallEvidence
from launcher.supervision.stragglers import StepBreakdown, Straggler

#: What ends a text ``clipped`` cut.
CLIP_MARK = "…"


def clipped(text: str, chars: int) -> str:
    """``text`` if it has at most ``chars`` characters, else its start and ``CLIP_MARK``, ``chars`` in all."""
    return text if len(text) <= chars else text[:max(0, chars - len(CLIP_MARK))] + CLIP_MARK[:chars]


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

    @classmethod
    def of_exit(cls, code: int | None) -> State:
        """A task's state from its exit code: running while None, succeeded on 0, else failed."""
        return State.RUNNING if code is None else State.SUCCEEDED if code == 0 else State.FAILED


class SupervisorState(str, Enum):
    """A run's supervisor (local, compose: the detached process; Slurm: the batch step; Kubernetes: its pod), as
    ``status`` sees it."""

    ALIVE = "alive"  # it runs
    STARTING = "starting"  # Kubernetes: its pod exists but does not run yet (pending, pulling its image, creating)
    LOST = "lost"  # the job is not over and no supervisor runs: the tasks run unsupervised until `watch` adopts them
    EXITED = "exited"  # the job is over and its supervisor ended


@dataclass
class StallStatus:
    """The stall watchdog of a job (``launcher.supervision.stall``), as ``status`` shows it.

    ``watching``: False while the job reports no steps (a program without ``launcher.progress``): the
    watchdog cannot see them. After a stall: how many so far, the last one's line, the tasks suspected
    (and why), and the directory holding every task's stacks of that stall. After each suspected stall
    (a stall or not): the evidence that decided it and its line (``last_check``).
    """

    watching: bool
    stalls: int = 0
    message: str = ""
    suspects: list[str] = field(default_factory=list)
    reason: str = ""
    stacks_dir: str | None = None
    evidence: StallEvidence | None = None
    last_check: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.evidence, str) and not isinstance(self.evidence, StallEvidence):
            self.evidence = StallEvidence(self.evidence)  # read back from JSON


@dataclass
class TaskStatus:
    name: str
    state: State
    restarts: int = 0
    exit_code: int | None = None
    message: str = ""
    preemptions: int = 0
    #: The task's last line of ordinary output (not an event), for programs that report no progress.
    last_line: str = ""
    #: A training task's last step-time breakdown (``step_time`` event); None before its first epoch ends.
    step_time: StepBreakdown | None = None


@dataclass
class JobStatus:
    """A cluster as a backend sees it."""

    name: str
    backend: BackendKind
    state: State
    tasks: list[TaskStatus] = field(default_factory=list)
    message: str = ""
    restarts: int = 0
    #: Restarts after preemptions (a task saved on a termination notice); not in ``restarts``.
    preemptions: int = 0
    progress: JobProgress = field(default_factory=JobProgress)
    tensorboard_dir: str | None = None
    supervisor: SupervisorState | None = None
    #: Why the supervisor is not alive, where the backend can say (Kubernetes: its pod cannot pull its image).
    supervisor_note: str = ""
    started_at: float | None = None
    #: The stall watchdog (None where no supervisor runs one).
    stall: StallStatus | None = None
    #: Training tasks slower than the others (``launcher.supervision.stragglers``), with their numbers.
    stragglers: list[Straggler] = field(default_factory=list)
    #: Where the run's time went (``launcher.supervision.goodput``), as of its last event or its end.
    goodput: Goodput | None = None

    def abridged(self, chars: int) -> JobStatus:
        """See the module contract."""
        stall = None if self.stall is None else replace(
            self.stall, message=clipped(self.stall.message, chars), reason=clipped(self.stall.reason, chars),
            last_check=clipped(self.stall.last_check, chars), suspects=list(self.stall.suspects))
        tasks = [replace(task, message=clipped(task.message, chars), last_line=clipped(task.last_line, chars))
                 for task in self.tasks]
        return replace(self, message=clipped(self.message, chars), supervisor_note=clipped(self.supervisor_note, chars),
                       tasks=tasks, stall=stall, stragglers=list(self.stragglers))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (enums as their values)."""
        document = asdict(self)
        document["progress"] = self.progress.model_dump(mode="json")
        document["goodput"] = None if self.goodput is None else self.goodput.model_dump(mode="json")
        document["backend"] = self.backend.value
        document["state"] = self.state.value
        document["supervisor"] = None if self.supervisor is None else self.supervisor.value
        for task in document["tasks"]:
            task["state"] = task["state"].value
        if self.stall is not None and self.stall.evidence is not None:
            document["stall"]["evidence"] = self.stall.evidence.value
        return document

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobStatus:
        """The inverse of ``to_dict``."""
        tasks = [TaskStatus(**{**t, "state": State(t["state"]),  # last_line, step_time: optional
                               "step_time": StepBreakdown(**t["step_time"]) if t.get("step_time") else None})
                 for t in data["tasks"]]
        supervisor, stall, goodput = data.get("supervisor"), data.get("stall"), data.get("goodput")
        return cls(**{**data, "backend": BackendKind(data["backend"]), "state": State(data["state"]), "tasks": tasks,
                      "supervisor": None if supervisor is None else SupervisorState(supervisor),
                      "stall": None if stall is None else StallStatus(**stall),
                      "stragglers": [Straggler(**s) for s in data.get("stragglers", [])],
                      "goodput": None if goodput is None else Goodput.model_validate(goodput),
                      "progress": JobProgress.model_validate(data.get("progress") or {})})
