"""The ``Runtime`` protocol: what every backend implements for the supervisor to run its tasks, and the optional
capabilities a runtime may add.

Contract: a backend gives the supervisor (``launcher.supervision.supervisor``) one object per job that satisfies
``Runtime``: start, adopt, poll, stop and read the output of one task at a time, send or read its stacks, and be
closed once. The supervisor calls it from one thread. A runtime may also be ``Standbys`` (it keeps a standby per
task for fast restarts), ``OomReports`` (its engine says whether the OOM killer ended a run), ``ReadsEveryStack``
(it reads every task's stacks from outside) or ``Placing`` (a started run may wait for a place to run); the
supervisor checks these with ``isinstance`` and does without them otherwise. The backends' runtimes:
``launcher.backends.local.processes.ProcessRuntime``,
``launcher.backends.compose.runtime.ContainerRuntime``, ``launcher.backends.kubernetes.runtime.KubernetesRuntime``,
``launcher.backends.slurm.steps.StepRuntime``; the tests' ``tests/fakes/scripted_runtime.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from launcher.plan.planner import Task
from launcher.supervision.publisher import log, one_line


class Runtime(Protocol):
    """How a backend runs one task. Every method gets the plan's ``Task``; all are called from one thread.

    ``start`` begins a fresh run of the task (a stopped or exited run may be
    started again); it raises ``launcher.errors.LaunchError`` if it cannot.
    ``poll`` returns the exit code of the current run once it has ended
    (128+N for signal N), else None; it raises ``launcher.supervision.backoff.NotNow`` while its engine cannot
    be reached now (nothing is known of the run: the supervisor backs its rounds off, and counts no fault). ``stop`` ends the current runs of
    ``tasks`` (terminate, i.e. SIGTERM, then kill after ``grace_seconds``)
    and returns once they are gone; it must not make the runtime restart them by itself, and
    is a no-op for tasks not running. ``output`` returns the lines (stdout
    and stderr) the task wrote since the previous call, a bounded batch of them (the rest at the next calls:
    however much a task prints, a read hands over a bounded amount); once its run ended (``poll`` gave its
    code, or ``stop`` returned) calls give the rest, then [] (the supervisor reads until then). ``close`` is called
    once after the job ended and every task was stopped. ``dump_stacks``
    sends ``launcher.protocol.stacks_signal.STACKS_SIGNAL`` to the task's program
    (not to a wrapper around it; the dump then comes in its ``output``). ``read_stacks`` reads
    the stacks of a running task's program from outside, for programs without the handler
    (local and compose: py-spy; every program's on a ``ReadsEveryStack`` runtime), and returns them, or None if
    it cannot. ``adopt`` attaches
    to the current run of a task that another (dead) supervisor started,
    running or ended: True if there is such a run (then ``poll``, ``stop``
    and ``output`` work on it as on a started one, output from the start of
    that run), False if there is none.
    """

    def start(self, task: Task) -> None: ...

    def adopt(self, task: Task) -> bool: ...

    def poll(self, task: Task) -> int | None: ...

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None: ...

    def output(self, task: Task) -> list[str]: ...

    def dump_stacks(self, task: Task) -> None: ...

    def read_stacks(self, task: Task) -> str | None: ...

    def close(self) -> None: ...


@runtime_checkable
class Standbys(Protocol):
    """A ``Runtime`` that keeps standbys for the tasks that have a ``Task.standby_command`` (processes, containers).

    ``prepare`` starts one for each of ``tasks`` that has none waiting and
    returns without waiting for it; a later ``start`` of such a task becomes
    its standby (a run as fresh as any ``start`` gives: the standby ran
    nothing but imports), or starts the task afresh when the standby is gone.
    ``close`` ends the standbys left.
    """

    def prepare(self, tasks: Sequence[Task]) -> None: ...


@runtime_checkable
class StartsTogether(Protocol):
    """A ``Runtime`` whose ``start`` waits long on its engine (Compose: a ``docker exec`` in the task's container to
    restart it in place), which starts several tasks at once.

    ``start_together(tasks)`` is ``start`` of each of ``tasks``, concurrently (``start`` is safe to call so); it
    returns once every one returned, raising the first exception one raised (the others' tasks are started).
    """

    def start_together(self, tasks: Sequence[Task]) -> None: ...


@runtime_checkable
class OomReports(Protocol):
    """A ``Runtime`` whose engine says whether the kernel's OOM killer ended a task's run (containers).

    ``oom_killed`` is asked about a run ``poll`` found ended with a non-zero code; False when unknown.
    """

    def oom_killed(self, task: Task) -> bool: ...


@runtime_checkable
class ReadsEveryStack(Protocol):
    """A ``Runtime`` whose ``read_stacks`` reads every task's program from outside, whether the program handles
    ``STACKS_SIGNAL`` or not (Kubernetes: each task's agent, ``launcher.worker.agent``, with py-spy): its tasks
    are never asked to ``dump_stacks`` (``signalled``). ``reads_every_stack`` is True."""

    reads_every_stack: bool


@runtime_checkable
class Placing(Protocol):
    """A ``Runtime`` whose started runs may wait for a place to run on a shared cluster (Kubernetes: a pod not
    created yet, or one the scheduler has not bound: a gang waiting for room, a quota, a higher priority first).

    ``placing`` is True while the task's current run waits so: its program has not started. The stall watchdog
    counts no silence meanwhile (``launcher.supervision.stall_watch``).
    """

    def placing(self, task: Task) -> bool: ...


def signalled(runtime: Runtime, announced: bool) -> bool:
    """Whether a task is asked for its stacks by ``dump_stacks`` (its dump then comes in its ``output``), rather
    than read by ``read_stacks``: it ``announced`` the handler (``stacks_on_signal``) and ``runtime`` is no
    ``ReadsEveryStack``."""
    return announced and not isinstance(runtime, ReadsEveryStack)


def prepare_standbys(runtime: Runtime, tasks: Sequence[Task]) -> None:
    """Standbys for the restarts to come, for those of ``tasks`` that have a ``standby_command``, on a ``Standbys``
    runtime, as soon as the tasks they stand by for have started (they import at idle priority meanwhile: a
    failure early in a run finds them ready); a runtime fault here is logged and costs only their speed."""
    waiting = [t for t in tasks if t.standby_command]
    if not waiting or not isinstance(runtime, Standbys):
        return
    try:
        runtime.prepare(waiting)
    except Exception as exc:
        log(f"no standbys: {one_line(exc)}")
