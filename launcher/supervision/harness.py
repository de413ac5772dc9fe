"""The one supervisor process of every backend (local and compose: detached on this machine; Slurm: the batch
step; Kubernetes: a pod in the cluster): its state dir, start, liveness, stop and adoption.

Contract: a job's ``StateDir`` (``naming.state_dir(backend, name)``, private: the plan's env may carry
credentials; refused when made, ``UnsafeStatePath``, unless its directories are the user's own) holds its
supervisor process's pid and log, ``started`` and the adoption lock, and names where the run's record is kept (its
``record``, a ``run_store.RunStore``: the plan, the published status, each stall's stacks), which the harness reads
and writes through that protocol only: by default the directory's own files (``RunFiles``). ``start``
detaches a supervisor (a ``Process``: the backend layer's command, the backend's ``host``) and returns once every
task started, else raises ``LaunchError``; ``launch`` adds the one cleanup rule (``undo``). ``run_supervisor`` is
the only place a supervisor process handles signals (SIGTERM, SIGINT: cancel; a ``Notice``: hand the job
back) and writes a failed status (as the loop writes, through a ``Publisher``: a store refusing it is logged,
the process still exits as it says). ``describe`` says when the supervisor is lost and reads the tasks' exits
(``read_exits``); ``adopt`` starts one that carries the policy on. A backend may keep the record elsewhere
(``Backend.state_of``: Kubernetes, the run's ConfigMap), and its ``Hosted.leave_on_sigterm`` makes SIGTERM
leave the tasks to the next supervisor (143: a supervisor pod moved). Where it runs and what it may
touch: docs/supervision.md.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from launcher.errors import LaunchError, TfclusterError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.supervision import detach, procfs
from launcher.supervision.publisher import Publisher
from launcher.supervision.run_store import RunFiles, RunStore
from launcher.supervision.runtime import Runtime
from launcher.supervision.statefile import open_private, owned_dir, private_dir, write_private
from launcher.supervision.status import JobStatus, State, SupervisorState
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import FAULT_PAUSE_SECONDS, FAULT_RETRIES, Tuning

#: How long ``start`` waits for the supervisor to report the tasks started.
START_TIMEOUT_SECONDS = 120.0
#: How long ``stop`` lets the supervisor stop the tasks before it is killed, on top of the plan's save grace.
STOP_TIMEOUT_SECONDS = 30.0
#: The argument that makes the supervisor process adopt the tasks instead of starting them.
ADOPT_FLAG = "--adopt"
#: The exit of a supervisor that SIGTERM made leave its tasks to the next one (shell-style: SIGTERM's 128 + 15).
LEFT_EXIT = 128 + signal.SIGTERM


@dataclass(frozen=True)
class Notice:
    """A signal telling the job to stop for now and run again elsewhere (Slurm's warning before the time limit).

    The harness stops every task as on SIGTERM (the coordinated save), publishing the job as restarting with
    ``message`` (never as ended), logs ``said``, then calls ``then`` (Slurm: requeue); ``then`` raising
    ``TfclusterError`` fails the job with ``failed`` and the error.
    """

    signal: signal.Signals
    message: str
    said: str
    then: Callable[[], None]
    failed: str


@dataclass(frozen=True)
class Hosted:
    """What a backend gives the supervisor process: the plan its runtime runs (Slurm: placed on the allocation),
    the runtime, the status to carry on from besides an adoption's (which the harness reads: Slurm's requeue),
    the notice it may get, and what SIGTERM means (stop the job, or leave it to the next supervisor)."""

    plan: Plan
    runtime: Runtime
    resume: JobStatus | None = None
    notice: Notice | None = None
    #: SIGTERM leaves the tasks as they are for the next supervisor to adopt (a pod moved), instead of stopping them.
    leave_on_sigterm: bool = False
    #: Asked once SIGTERM cancelled the job: the message of a job handed to a next supervisor meanwhile (Slurm: the job
    #: requeued by an administrator), whose status then says restarting, never that it ended; None: it was cancelled.
    handed_back: Callable[[], str | None] | None = None


class CannotRun(Exception):
    """Raised by a backend's ``host``: the job fails with this message before any task starts (``base``: the
    status it fails from, e.g. the last one of a job requeued past its preemption budget)."""

    def __init__(self, message: str, base: JobStatus | None = None):
        super().__init__(message)
        self.base = base


class NothingToDo(Exception):  # noqa: N818 - an outcome, not an error
    """Raised by a backend's ``host``: the job is already over (a requeue after it succeeded); its last status
    stands and the process exits 0, logging this message."""


#: A backend's part of the supervisor process: ``host(plan, state, adopt)``.
Host = Callable[[Plan, "StateDir", bool], Hosted]


@dataclass(frozen=True)
class Process:
    """A backend's supervisor process as ``start`` starts it: its ``command`` (the state dir and ``ADOPT_FLAG``
    follow; ``launcher.backends.supervisor_process`` builds it), the ``host`` that command runs, and the
    ``state_of`` it reads its state dir with, which a process forked from a lean command calls at once."""

    command: Sequence[str]
    host: Host
    #: The state its command line names, as the process makes it (``Backend.state_of``).
    state_of: Callable[[str], StateDir]


#: What a backend reads from its runtime about tasks nobody supervises: {task: exit code, None while it runs}.
ReadExits = Callable[[Plan], Mapping[str, int | None]]


class StateDir:
    """The files of one run's supervisor process on its machine (see the module contract), and where the run's
    record is kept (``record``)."""

    def __init__(self, root: Path, record: RunStore | None = None):
        """``UnsafeStatePath`` if ``root`` (or a directory above it, up to the home) is not tfcluster's own.

        ``record``: where the run's record is kept; None: in this directory (``files``)."""
        self.root = owned_dir(root)
        #: The record's files in this directory; ``plan.json`` there is what makes the directory a run's.
        self.files = RunFiles(root)
        self.record: RunStore = self.files if record is None else record
        self.pid = root / "supervisor.pid"
        self.log = root / "supervisor.log"
        self.started = root / "started"
        self.adopt_lock = root / "adopt.lock"

    @classmethod
    def of(cls, backend: BackendKind, name: str) -> StateDir:
        return cls(naming.state_dir(backend.value, name))

    def exists(self) -> bool:
        return self.files.exists()

    def create(self, plan: Plan) -> None:
        """A fresh directory holding ``plan`` (whatever an earlier run left is removed)."""
        self.remove()
        private_dir(self.root)
        self.files.write_plan(plan)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

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


def start(state: StateDir, supervisor: Process, timeout: float = START_TIMEOUT_SECONDS, adopt: bool = False) -> None:
    """Start the detached ``supervisor`` of ``state`` and wait until it started (``adopt``: adopted) every task."""
    state.started.unlink(missing_ok=True)
    argv = [*supervisor.command, str(state.root), *([ADOPT_FLAG] if adopt else [])]
    with open_private(state.log) as log:
        process = detach.start(argv, log, lambda: run_supervisor(supervisor.state_of(str(state.root)), supervisor.host,
                                                                 adopt))
    write_private(state.pid, str(process.pid))
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        exited = process.ended()  # before reading the files: it may finish in between
        if state.started.exists():
            return
        job = state.record.read_status()
        if job is not None and job.state is State.FAILED and not adopt:
            raise LaunchError(job.message)  # failed before every task ran: the tasks could not be started
        if exited:
            break
        time.sleep(0.05)
    raise LaunchError(f"the supervisor did not start the cluster: {state.last_log_line() or 'timed out'}")


def launch(state: StateDir, supervisor: Process, undo: Callable[[], None]) -> None:
    """``start``, calling ``undo`` (the backend removes what it set up) when the start failed, or was
    interrupted (Ctrl-C) before every task ran: nothing half-started stays. Interrupted later, the
    cluster runs on for the caller to stop (``Backend.stop``), its logs kept."""
    try:
        start(state, supervisor)
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
            grace = state.record.read_plan().policy.save_grace_seconds if state.exists() else 0
            timeout = STOP_TIMEOUT_SECONDS + grace
        procfs.terminate(pid, state.marker, timeout)


def lost(state: StateDir, job: JobStatus | None) -> bool:
    """True if the job of ``state`` is not over and no supervisor runs it (it died, or the machine restarted)."""
    return job is not None and state.launched() and not job.state.terminal and state.supervisor() is None


def describe(state: StateDir, backend: BackendKind, read_exits: ReadExits) -> JobStatus | None:
    """The status the supervisor wrote, saying whether it runs; the tasks' real states when it died."""
    if not state.exists():
        return None
    job = state.record.read_status() or JobStatus(state.root.name, backend, State.PENDING,
                                                  tensorboard_dir=state.record.read_plan().run_config.tensorboard_dir)
    alive = state.supervisor() is not None
    if lost(state, job):
        job.supervisor = SupervisorState.LOST
        last = job.message
        try:
            observed = read_exits(state.record.read_plan())
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


def adopt(state: StateDir, supervisor: Process) -> list[str]:
    """If the job of ``state`` lost its supervisor, start one that adopts its tasks; one line per action taken."""
    if not lost(state, state.record.read_status()):
        return []
    with open_private(state.adopt_lock) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        job = state.record.read_status()
        if not lost(state, job):
            return []  # another command adopted them meanwhile
        start(state, supervisor, adopt=True)
    assert job is not None
    return [f"{job.name}: its supervisor was gone; a new one adopted the tasks "
            f"(restarts used {job.restarts}/{state.record.read_plan().policy.max_restarts})"]


def wake_supervisor() -> None:
    """End the supervisor's pause between poll rounds now (``_pause_until_a_signal``), from any thread: a runtime
    that learns of a task's end in a thread of its own (a Kubernetes pod's log) has it seen at once, as a local
    task's exit is. SIGCHLD, whose default action is to ignore it: a no-op where no supervisor pauses."""
    os.kill(os.getpid(), signal.SIGCHLD)


def _pause_until_a_signal() -> Callable[[float], None]:
    """A pause between poll rounds that ends early on any signal: a child that ended (a local task's
    wrapper: its exit is seen at once, not up to a round later), ``wake_supervisor``, or a cancellation.

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


def run_supervisor(state: StateDir, host: Host, adopt: bool = False) -> int:
    """Supervise the plan ``state`` keeps with the runtime ``host`` gives until the job is terminal; 0 if it
    succeeded (or was handed back on its ``Notice``); 143 when SIGTERM left the tasks to the next supervisor.

    ``adopt``: take over the tasks of the supervisor that wrote the current status (it died), if one did.
    """
    plan = state.record.read_plan()
    try:
        hosted = host(plan, state, adopt)
    except NothingToDo as done:
        print(f"{plan.name}: {done}", flush=True)
        return 0
    except CannotRun as exc:
        return _fail(state, plan, str(exc), exc.base)
    except Exception as exc:
        return _fail(state, plan, " ".join(str(exc).split()) or type(exc).__name__)
    plan, runtime, notice = hosted.plan, hosted.runtime, hosted.notice
    resume = hosted.resume or (state.record.read_status() if adopt else None)
    noticed = threading.Event()

    def publish(status: JobStatus) -> None:
        """After the notice, or where the backend says the job was handed on, it is handed back, not cancelled:
        never say it ended (a next supervisor may already have written its own status)."""
        if status.state is State.CANCELLED:
            if notice is not None and noticed.is_set():
                status = replace(status, state=State.RESTARTING, message=notice.message)
            elif hosted.handed_back is not None and (message := hosted.handed_back()) is not None:
                status = replace(status, state=State.RESTARTING, message=message)
        state.record.write_status(status)

    supervisor = Supervisor(plan, runtime, on_status=publish, on_started=state.mark_started, resume=resume,
                            keep_stacks=state.record.keep_stacks, tuning=Tuning(pause=_pause_until_a_signal()))

    def on_notice(signum: int, frame: object) -> None:
        noticed.set()
        supervisor.cancel()

    if notice is not None:
        signal.signal(notice.signal, on_notice)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: supervisor.cancel())
    if hosted.leave_on_sigterm:
        signal.signal(signal.SIGTERM, lambda signum, frame: supervisor.leave())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    job = supervisor.run()
    runtime.close()
    if supervisor.left:  # not 0: the pod's Job runs the next supervisor only for a pod that failed
        print(f"{plan.name}: stopped: the tasks are left as they are, for the next supervisor to adopt", flush=True)
        return LEFT_EXIT
    if notice is not None and noticed.is_set() and job.state is State.CANCELLED:
        Publisher(publish).publish_end(job, FAULT_RETRIES, FAULT_PAUSE_SECONDS)
        print(f"{plan.name}: {notice.said}", flush=True)
        try:
            notice.then()
        except TfclusterError as exc:
            return _fail(state, plan, f"{notice.failed}: {exc}", job)
        return 0
    print(f"{plan.name}: {job.state.value}: {job.message}", flush=True)
    return 0 if job.state is State.SUCCEEDED else 1


def _fail(state: StateDir, plan: Plan, message: str, base: JobStatus | None = None) -> int:
    """Publish the job failed with ``message`` (from ``base``, else a fresh status) and log it; 1 (also when the
    status cannot be written: ``Publisher``)."""
    job = base or JobStatus(plan.name, plan.backend, State.FAILED)
    Publisher(state.record.write_status).publish_end(replace(job, state=State.FAILED, message=f"failed: {message}"),
                                                     FAULT_RETRIES, FAULT_PAUSE_SECONDS)
    print(f"{plan.name}: failed: {message}", flush=True)
    return 1
