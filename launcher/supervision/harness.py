"""The detached supervisor that local and compose clusters share: its files, its start, its liveness, its stop.

Contract: every cluster of a backend that supervises from this machine has a
``StateDir`` at ``naming.state_dir(backend, name)`` holding:

- ``plan.json``: the plan being supervised (written by ``submit``);
  the directory and every file in it are private to their owner
  (``launcher.supervision.statefile``): the plan's env may carry credentials;
- ``status.json``: the ``JobStatus``, rewritten atomically on every change;
- ``supervisor.pid`` and ``supervisor.log``: the detached supervisor process
  and its output (one line per runtime fault, never a traceback);
- ``started``: present once every task was started (or adopted);
- ``adopt.lock``: held while a command starts a supervisor that adopts;
- ``stacks/stall-<n>/<task>.txt``: every task's stacks at the job's n-th stall;
- whatever the backend adds (task logs, compose files).

``start(state, entry_module)`` starts the supervisor, ``python -m
<entry_module> <dir>``, in a session of its own (so it outlives the command
that launched it; ``launcher.supervision.detach``: forked from the
``tfcluster`` command, calling ``serve`` with the module's
``runtime(plan, state)``, which is what its ``__main__`` runs) and
returns once every task was started; a job that failed before that could
not start its tasks, and that is a failed launch (``LaunchError``), the
same on every backend. ``launch(state, entry_module, undo)`` is ``start``
with the one cleanup rule: ``undo`` after a failed start, or a Ctrl-C before
every task ran; a Ctrl-C after that leaves the cluster to the caller's stop,
its logs kept.
``serve(dir, make_runtime)`` is the body of that process: it supervises the
plan with ``launcher.supervision.supervisor`` until the job is terminal;
SIGTERM or SIGINT cancels (every task is stopped first). A supervisor is
alive while its pid runs a command line naming its state dir, so a pid the
system reused is never taken for it.

A supervisor can die (``kill -9``, OOM, a reboot) while its tasks run on.
``describe`` then says so at once (``JobStatus.supervisor`` is ``lost``) and
reads the tasks' real states through the backend's ``observe``; ``adopt``
(what ``watch`` calls) starts a new supervisor that adopts the tasks and
carries the policy on from the last status (``Supervisor(resume=...)``);
two commands adopting at once start one supervisor.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping
from importlib import import_module
from pathlib import Path

from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.supervision import detach, procfs
from launcher.supervision.statefile import open_private, private_dir, read_json, write_json, write_private
from launcher.supervision.status import JobStatus, State, SupervisorState
from launcher.supervision.supervisor import Runtime, Supervisor

#: How long ``start`` waits for the supervisor to report the tasks started.
START_TIMEOUT_SECONDS = 120.0
#: How long ``stop`` lets the supervisor stop the tasks before it is killed, on top of the plan's save grace.
STOP_TIMEOUT_SECONDS = 30.0
#: The argument that makes the supervisor process adopt the tasks instead of starting them.
ADOPT_FLAG = "--adopt"

#: What a backend reads from its runtime about tasks nobody supervises: {task: exit code, None while it runs}.
Observe = Callable[[Plan], Mapping[str, int | None]]


class StateDir:
    """The files of one supervised cluster (see the module contract)."""

    def __init__(self, root: Path):
        self.root = root
        self.plan = root / "plan.json"
        self.status = root / "status.json"
        self.pid = root / "supervisor.pid"
        self.log = root / "supervisor.log"
        self.started = root / "started"
        self.adopt_lock = root / "adopt.lock"
        self.stacks = root / "stacks"

    @classmethod
    def of(cls, backend: BackendKind, name: str) -> StateDir:
        return cls(naming.state_dir(backend.value, name))

    def exists(self) -> bool:
        return self.plan.exists()

    def create(self, plan: Plan) -> None:
        """A fresh directory holding ``plan`` (whatever an earlier run left is removed)."""
        self.remove()
        private_dir(self.root)
        write_private(self.plan, plan.model_dump_json())

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def read_plan(self) -> Plan:
        return Plan.model_validate_json(self.plan.read_text())

    def read_status(self) -> JobStatus | None:
        data = read_json(self.status)
        return None if data is None else JobStatus.from_dict(data)

    def write_status(self, status: JobStatus) -> None:
        write_json(self.status, status.to_dict())

    def supervisor(self) -> int | None:
        """Pid of this cluster's running supervisor, or None."""
        try:
            pid = int(self.pid.read_text())
        except (OSError, ValueError):
            return None
        return pid if procfs.runs(pid, self.marker) else None

    def mark_started(self) -> None:
        write_private(self.started, "")

    def launched(self) -> bool:
        """True once a supervisor was started (before that, ``submit`` is still setting up)."""
        return self.pid.exists()

    def last_log_line(self) -> str:
        try:
            lines = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""

    @property
    def marker(self) -> str:
        """What the supervisor's command line holds, and no other process's: its state dir."""
        return str(self.root)


def start(state: StateDir, entry_module: str, timeout: float = START_TIMEOUT_SECONDS, adopt: bool = False) -> None:
    """Start the detached supervisor of ``state`` and wait until it started (``adopt``: adopted) every task."""
    state.started.unlink(missing_ok=True)
    argv = [sys.executable, "-m", entry_module, str(state.root), *([ADOPT_FLAG] if adopt else [])]
    with open_private(state.log) as log:
        process = detach.start(argv, log, lambda: serve(state.root, import_module(entry_module).runtime, adopt))
    write_private(state.pid, str(process.pid))
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        exited = process.ended()  # before reading the files: it may finish in between
        if state.started.exists():
            return
        job = state.read_status()
        if job is not None and job.state is State.FAILED and not adopt:
            raise LaunchError(job.message)  # failed before every task ran: the tasks could not be started
        if exited:
            break
        time.sleep(0.05)
    raise LaunchError(f"the supervisor did not start the cluster: {state.last_log_line() or 'timed out'}")


def launch(state: StateDir, entry_module: str, undo: Callable[[], None]) -> None:
    """``start``, calling ``undo`` (the backend removes what it set up) when the start failed, or was
    interrupted (Ctrl-C) before every task ran: nothing half-started stays. Interrupted later, the
    cluster runs on for the caller to stop (``Backend.stop``), its logs kept."""
    try:
        start(state, entry_module)
    except KeyboardInterrupt:
        if not state.started.exists():
            undo()
        raise
    except BaseException:
        undo()
        raise


def stop(state: StateDir, timeout: float | None = None) -> None:
    """SIGTERM the supervisor (it stops every task), SIGKILL it if it has not exited in time.

    The default time is ``STOP_TIMEOUT_SECONDS`` plus the plan's ``save_grace_seconds``: the
    supervisor gives the tasks that long to save on the notice before it kills them.
    """
    pid = state.supervisor()
    if pid is not None:
        if timeout is None:
            grace = state.read_plan().policy.save_grace_seconds if state.plan.exists() else 0
            timeout = STOP_TIMEOUT_SECONDS + grace
        procfs.terminate(pid, state.marker, timeout)


def lost(state: StateDir, job: JobStatus | None) -> bool:
    """True if the job of ``state`` is not over and no supervisor runs it (it died, or the machine restarted)."""
    return job is not None and state.launched() and not job.state.terminal and state.supervisor() is None


def describe(state: StateDir, backend: BackendKind, observe: Observe) -> JobStatus | None:
    """The status the supervisor wrote, saying whether it runs; the tasks' real states when it died."""
    if not state.exists():
        return None
    job = state.read_status() or JobStatus(state.root.name, backend, State.PENDING,
                                           tensorboard_dir=state.read_plan().run_config.tensorboard_dir)
    alive = state.supervisor() is not None
    if lost(state, job):
        job.supervisor = SupervisorState.LOST
        last = job.message
        try:
            observed = observe(state.read_plan())
        except Exception as exc:  # the runtime does not answer either (engine down): say so, keep the rest
            last = f"cannot read the tasks: {' '.join(str(exc).split()) or type(exc).__name__}; {last}"
            observed = {}
        for task in job.tasks:
            if not task.state.terminal and task.name in observed:
                code = observed[task.name]
                task.state = State.of_exit(code)
                task.exit_code = code
        job.message = (f"the supervisor is gone (see {state.log}): the tasks are not supervised; "
                       f"`tfcluster watch {job.name}` adopts them; last: {last}")
    elif state.launched():
        job.supervisor = SupervisorState.ALIVE if alive else SupervisorState.EXITED
    return job


def adopt(state: StateDir, entry_module: str) -> list[str]:
    """If the job of ``state`` lost its supervisor, start one that adopts its tasks; one line per action taken."""
    if not lost(state, state.read_status()):
        return []
    with open_private(state.adopt_lock) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        job = state.read_status()
        if not lost(state, job):
            return []  # another command adopted them meanwhile
        start(state, entry_module, adopt=True)
    assert job is not None
    return [f"{job.name}: its supervisor was gone; a new one adopted the tasks "
            f"(restarts used {job.restarts}/{state.read_plan().policy.max_restarts})"]


def main(make_runtime: Callable[[Plan, StateDir], Runtime], argv: list[str] | None = None) -> int:
    """``python -m <entry_module> DIR [--adopt]``: ``serve`` the cluster in ``DIR``."""
    args = sys.argv[1:] if argv is None else argv
    return serve(Path(args[0]), make_runtime, adopt=ADOPT_FLAG in args[1:])


def _pause_until_a_signal() -> Callable[[float], None]:
    """A pause between poll rounds that ends early on any signal: a child that ended (a local task's
    wrapper: its exit is seen at once, not up to a round later), or a cancellation.

    Python's C-level handler writes each signal's number to the wakeup pipe (``signal.set_wakeup_fd``);
    SIGCHLD needs a Python handler for that (its default action is to ignore it).
    """
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def pause(seconds: float) -> None:
        select.select([read], [], [], seconds)
        try:
            os.read(read, 4096)
        except BlockingIOError:
            pass

    return pause


def serve(root: Path, make_runtime: Callable[[Plan, StateDir], Runtime], adopt: bool = False) -> int:
    """Supervise the plan in ``root`` until the job is terminal (the detached process); 0 if it succeeded.

    ``adopt``: take over the tasks of the supervisor that wrote the current status (it died).
    """
    state = StateDir(root)
    plan = state.read_plan()
    resume = state.read_status() if adopt else None
    try:
        runtime = make_runtime(plan, state)
    except Exception as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        state.write_status(JobStatus(plan.name, plan.backend, State.FAILED, message=f"failed: {message}"))
        print(f"{plan.name}: failed: {message}", flush=True)
        return 1
    supervisor = Supervisor(plan, runtime, on_status=state.write_status, on_started=state.mark_started, resume=resume,
                            stacks_dir=state.stacks, pause=_pause_until_a_signal())
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: supervisor.cancel())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    job = supervisor.run()
    runtime.close()
    print(f"{plan.name}: {job.state.value}: {job.message}", flush=True)
    return 0 if job.state is State.SUCCEEDED else 1
