"""Backend-independent supervision of one cluster: start every task, apply the restart and success policies.

Contract: a backend provides a ``Runtime`` (how to start, poll, stop and read
one task: a local process, a container); ``Supervisor.run`` drives it until
the job is terminal and always leaves no task running. The policy is pure
(``Rules.decide``): given one task's exit it says continue, restart which
tasks, succeed or fail (with a message naming the task and its last error).

Rules, after TFJob and the tf.distribute fault-tolerance guides:

- restart policy ``never`` fails on any non-zero exit; ``on-failure`` and
  ``always`` retry it; ``exit-code`` retries codes >= 128 (killed by a
  signal) and fails on 1-127. ``always`` also restarts a ps or evaluator
  that exits 0 before the job is over (they are servers); a chief or worker
  exiting 0 has finished its training.
- ``restart.max_restarts`` counts restart *events* of the job (one gang
  restart = one), across all tasks.
- what restarts: MultiWorkerMirrored (and single-task strategies) restart
  every training task together (the survivors of a lost collective never
  recover on their own); ParameterServer restarts only a failed worker (the
  coordinator tolerates losing workers) but every training task when a ps
  or the chief fails; an evaluator failure restarts only the evaluator.
- success policy ``chief``: the chief, or worker 0 when there is no chief,
  exited 0; ``all-workers``: the chief and every worker exited 0. The other
  tasks then get ``grace_seconds`` to exit by themselves (the completion
  marker) before they are stopped.
- ``deadline_seconds`` elapsed: the job fails and everything is stopped.

Exit codes are reported shell-style: a task killed by signal N exits 128+N.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol

from launcher.backends.api import JobStatus, LaunchError, State, TaskStatus
from launcher.events import EventKind, parse_event
from launcher.plan import Plan, Task
from launcher.spec import RestartPolicy, RoleType, Strategy, SuccessPolicy

#: Exit codes at or above this mean "killed by a signal" (OOM, preemption, kill -9): retryable under ``exit-code``.
SIGNAL_EXIT_BASE = 128
#: Progress events merged into ``JobStatus.progress``.
PROGRESS_EVENTS = frozenset({EventKind.STARTED, EventKind.RESTORED, EventKind.STEP, EventKind.EPOCH, EventKind.FINISHED})


class Runtime(Protocol):
    """How a backend runs one task. Every method gets the plan's ``Task``; all are called from one thread.

    ``start`` begins a fresh run of the task (a stopped or exited run may be
    started again); it raises ``launcher.backends.api.LaunchError`` if it
    cannot. ``poll`` returns the exit code of the current run once it has
    ended (128+N for signal N), else None. ``stop`` ends the current runs of
    ``tasks`` (terminate, then kill after a short wait) and returns once
    they are gone; it must not make the runtime restart them by itself, and
    is a no-op for tasks not running. ``output`` returns the lines (stdout
    and stderr) the task wrote since the previous call.
    """

    def start(self, task: Task) -> None: ...

    def poll(self, task: Task) -> int | None: ...

    def stop(self, tasks: Sequence[Task]) -> None: ...

    def output(self, task: Task) -> list[str]: ...


class Action(str, Enum):
    CONTINUE = "continue"
    RESTART = "restart"
    SUCCEED = "succeed"
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    """What to do after one exit. ``restart`` lists task names (RESTART only); ``message`` is for people."""

    action: Action
    restart: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class Rules:
    """The job's policies, taken from a plan; ``decide`` is pure."""

    strategy: Strategy
    restart_policy: RestartPolicy
    max_restarts: int
    success_policy: SuccessPolicy
    tasks: tuple[Task, ...]

    @classmethod
    def from_plan(cls, plan: Plan) -> "Rules":
        spec = plan.spec
        return cls(plan.strategy, spec.restart.policy, spec.restart.max_restarts, spec.success_policy, tuple(plan.tasks))

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    def retryable(self, exit_code: int) -> bool:
        if self.restart_policy is RestartPolicy.NEVER:
            return False
        if self.restart_policy is RestartPolicy.EXIT_CODE:
            return exit_code >= SIGNAL_EXIT_BASE
        return True

    def restart_group(self, name: str) -> tuple[str, ...]:
        """The tasks restarted together when ``name`` fails."""
        task = self.task(name)
        pss = self.strategy is Strategy.PARAMETER_SERVER
        if task.type is RoleType.EVALUATOR or (pss and task.type is RoleType.WORKER):
            return (name,)
        return tuple(t.name for t in self.tasks if t.type is not RoleType.EVALUATOR)

    def lead(self) -> str:
        """The chief, or worker 0 when there is no chief: its events are the job's progress."""
        return next(t.name for t in self.tasks if t.type in (RoleType.CHIEF, RoleType.WORKER))

    def deciding_tasks(self) -> tuple[str, ...]:
        """Tasks whose exit 0 makes the job succeed (all of them, for ``all-workers``)."""
        if self.success_policy is SuccessPolicy.ALL_WORKERS:
            return tuple(t.name for t in self.tasks if t.type in (RoleType.CHIEF, RoleType.WORKER))
        return (self.lead(),)

    def decide(self, name: str, exit_code: int, exited: Mapping[str, int], restarts_used: int, last_error: str) -> Decision:
        """Decide after task ``name``'s current run exited with ``exit_code``.

        ``exited`` holds the exit codes of every task whose current run has
        ended (``name`` included); ``restarts_used`` counts restart events so
        far; ``last_error`` is the task's last error line, for messages.
        """
        if exit_code == 0:
            if all(exited.get(t) == 0 for t in self.deciding_tasks()):
                return Decision(Action.SUCCEED, message=f"succeeded: {name} exited 0")
            server = self.task(name).type in (RoleType.PS, RoleType.EVALUATOR)
            if server and self.restart_policy is RestartPolicy.ALWAYS:
                return self._restart(name, "exited 0 before the job ended", restarts_used, last_error)
            return Decision(Action.CONTINUE, message=f"{name} finished")
        failure = f"exited with code {exit_code}"
        if not self.retryable(exit_code):
            why = ("restart policy exit-code retries only codes >= 128"
                   if self.restart_policy is RestartPolicy.EXIT_CODE else "restart policy never")
            return Decision(Action.FAIL, message=f"failed: task {name} {failure} ({why}); last error: {last_error}")
        return self._restart(name, failure, restarts_used, last_error)

    def _restart(self, name: str, failure: str, restarts_used: int, last_error: str) -> Decision:
        if restarts_used >= self.max_restarts:
            return Decision(
                Action.FAIL,
                message=f"failed: task {name} {failure} and the restart budget ({self.max_restarts}) is used up; "
                f"last error: {last_error}",
            )
        group = self.restart_group(name)
        return Decision(
            Action.RESTART,
            restart=group,
            message=f"task {name} {failure}: restarting {', '.join(group)} "
            f"(restart {restarts_used + 1}/{self.max_restarts}); last error: {last_error}",
        )


def _decision_order(exit: tuple[str, int]) -> tuple[bool, bool]:
    """Order of the exits of one poll round: successes, then signal deaths, then 1-127.

    Tasks that died together are decided root cause first: a killed worker
    (137) restarts the group before its peer's follow-on failure (e.g. 1) can
    fail the job under the ``exit-code`` policy.
    """
    code = exit[1]
    return code != 0, 0 < code < SIGNAL_EXIT_BASE


@dataclass
class _Run:
    """Supervision state of one task."""

    task: Task
    status: TaskStatus
    running: bool = False
    last_error: str = ""
    failed_reason: str = ""

    def error(self) -> str:
        return self.failed_reason or self.last_error or "(no output)"


class Supervisor:
    """Runs one cluster through a ``Runtime`` until it succeeds, fails, passes its deadline or is cancelled.

    ``on_status`` receives a fresh ``JobStatus`` after every change (the local
    backend writes it to disk, for ``status`` from other shells). ``cancel``
    may be called from another thread or a signal handler.
    """

    def __init__(
        self,
        plan: Plan,
        runtime: Runtime,
        *,
        on_status: Callable[[JobStatus], None] = lambda status: None,
        poll_seconds: float = 0.5,
        grace_seconds: float = 30.0,
    ):
        self.plan = plan
        self.rules = Rules.from_plan(plan)
        self.runtime = runtime
        self.on_status = on_status
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self._runs = {t.name: _Run(t, TaskStatus(t.name, State.PENDING)) for t in plan.tasks}
        self._job = JobStatus(plan.name, plan.backend, State.PENDING, progress={"epochs": plan.run_config.training.epochs})
        self._published: JobStatus | None = None
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def status(self) -> JobStatus:
        return replace(self._job, tasks=[replace(r.status) for r in self._runs.values()], progress=dict(self._job.progress))

    def run(self) -> JobStatus:
        """Supervise until terminal; whatever happens, every task is stopped before this returns."""
        try:
            self._start(self._runs)
            self._set_job(State.RUNNING, "running")
            state, message = self._supervise()
            if state is State.SUCCEEDED:
                self._linger()
            self._set_job(state, message)
        except LaunchError as exc:
            self._set_job(State.FAILED, f"failed: {exc}")
        finally:
            self._stop([r for r in self._runs.values() if r.running], "stopped")
            self._publish()
        return self.status()

    # -- the loop -------------------------------------------------------------------------------

    def _supervise(self) -> tuple[State, str]:
        deadline = self.plan.spec.deadline_seconds
        ends = None if deadline is None else time.monotonic() + deadline
        while True:
            if self._cancelled.is_set():
                return State.CANCELLED, "cancelled"
            if ends is not None and time.monotonic() >= ends:
                return State.FAILED, f"failed: deadline of {deadline} s exceeded"
            for name, code in sorted(self._poll(), key=_decision_order):
                if self._runs[name].running:
                    continue  # restarted by an earlier decision of this round
                decision = self.rules.decide(name, code, self._exited(), self._job.restarts, self._runs[name].error())
                if decision.action is Action.RESTART:
                    self._restart(decision)
                    continue
                if decision.action is Action.SUCCEED:
                    return State.SUCCEEDED, decision.message
                if decision.action is Action.FAIL:
                    return State.FAILED, decision.message
            self._publish()
            self._cancelled.wait(self.poll_seconds)

    def _poll(self) -> list[tuple[str, int]]:
        """Read new output of every running task; record and return the runs that ended, in plan order."""
        ended = []
        for name, run in self._runs.items():
            if not run.running:
                continue
            code = self.runtime.poll(run.task)
            self._read(run)
            if code is not None:
                run.running = False
                run.status.exit_code = code
                run.status.state = State.FAILED if code else State.SUCCEEDED
                ended.append((name, code))
        return ended

    def _exited(self) -> dict[str, int]:
        return {name: run.status.exit_code for name, run in self._runs.items()
                if not run.running and run.status.exit_code is not None}

    def _restart(self, decision: Decision) -> None:
        runs = [self._runs[name] for name in decision.restart]
        self._job.restarts += 1
        self._set_job(State.RESTARTING, decision.message)
        self._stop([r for r in runs if r.running], "stopped for a restart")
        for run in runs:
            run.status.restarts += 1
            run.status.state = State.RESTARTING
        self._publish()
        self._start({r.task.name: r for r in runs})
        self._job.state = State.RUNNING

    def _linger(self) -> None:
        """After success: let the remaining tasks exit by themselves for ``grace_seconds``."""
        ends = time.monotonic() + self.grace_seconds
        while True:
            self._poll()
            self._publish()
            left = ends - time.monotonic()
            if not any(r.running for r in self._runs.values()) or left <= 0 or self._cancelled.is_set():
                return
            self._cancelled.wait(min(self.poll_seconds, left))

    # -- actions ----------------------------------------------------------------------------------

    def _start(self, runs: Mapping[str, _Run]) -> None:
        for run in runs.values():
            self.runtime.start(run.task)
            run.running = True
            run.failed_reason = run.last_error = ""
            run.status.state = State.RUNNING
            run.status.exit_code = None
            run.status.message = ""
        self._publish()

    def _stop(self, runs: Iterable[_Run], message: str) -> None:
        runs = list(runs)
        if not runs:
            return
        self.runtime.stop([r.task for r in runs])
        for run in runs:
            self._read(run)
            run.running = False
            run.status.state = State.CANCELLED
            run.status.message = message

    def _read(self, run: _Run) -> None:
        for line in self.runtime.output(run.task):
            event = parse_event(line)
            if event is None:
                if line.strip():
                    run.last_error = line.strip()
                continue
            self._on_event(run, event)

    def _on_event(self, run: _Run, event: dict[str, Any]) -> None:
        try:
            kind = EventKind(event["event"])
        except ValueError:
            return
        fields = {k: v for k, v in event.items() if k not in ("event", "time")}
        if kind is EventKind.FAILED:
            run.failed_reason = str(event.get("reason", "failed"))
        elif kind is EventKind.RESTORED:
            run.status.message = f"restored at epoch {event.get('epoch')} step {event.get('step')}"
        elif kind is EventKind.EVALUATION:
            self._job.progress["evaluation"] = event.get("metrics")
        if kind in PROGRESS_EVENTS and run.task.name == self.rules.lead():
            self._job.progress.update(fields, event=kind.value)

    def _set_job(self, state: State, message: str) -> None:
        self._job.state = state
        self._job.message = message
        self._publish()

    def _publish(self) -> None:
        status = self.status()
        if status != self._published:
            self._published = status
            self.on_status(status)
