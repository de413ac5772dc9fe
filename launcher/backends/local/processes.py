"""The local ``Runtime``: each task is a subprocess in its own process group, logging to one file.

Contract: ``start`` runs ``task.command`` in ``plan.workdir`` with the plan's task env, stdin
closed, output appended to the private ``<log_dir>/<task>.log``; ``stop`` and an observed exit kill
the task's whole process group. ``on_runs`` gets ``{task: RunRecord}`` after every start. A ``/bin/sh``
wrapper writes each exit code (128+N for signal N) to ``<exit_dir>/<task>``, so ``adopt`` and
``read_exits`` work after the supervisor died; a run gone without a code is ``LOST_EXIT``. Adopted
groups are checked against reuse before any signal. Standbys: ``prepare`` / ``start`` / ``close``; the
standbys of the entrypoint (``launcher.plan.targets.zygote_command``) import nothing themselves: one zygote per
task environment (``launcher.worker.zygote``, its own process group, output in ``<log_dir>/zygote.log``; tasks
whose roles have no env of their own share one) imports TensorFlow once, at the normal priority, and forks, into
the called standby's group, the task it becomes: every run of such a task, its first and every restart, is a fork
of an import done before the first run; ``close`` ends them too.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from launcher.backends import ports
from launcher.backends.lines import LineReader
from launcher.backends.pyspy import read_local_stacks, say_none
from launcher.errors import LaunchError
from launcher.plan.planner import Plan, Task
from launcher.plan.targets import zygote_command
from launcher.protocol import env
from launcher.protocol.exitcodes import LOST_EXIT, SIGNAL_EXIT_BASE
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.protocol.standby import ZYGOTE_FD, start_zygote, zygote_channel
from launcher.supervision.procfs import stat_fields
from launcher.supervision.statefile import open_private, private_dir

#: ``sh -c WRAPPER EXIT_FILE COMMAND...``: run COMMAND, write its exit code to EXIT_FILE, exit with it.
#: The trap defers SIGTERM/SIGINT sent to the group until COMMAND (which gets them too) has exited.
WRAPPER = "trap 'true' INT TERM; \"$@\"; code=$?; (umask 077; echo \"$code\" > \"$0\"); exit \"$code\""

#: The variables that tell a plan's tasks apart, left out of the zygote's environment (its children get their own).
TASK_IDENTITY = frozenset({env.TF_CONFIG, env.TASK_NAME, env.IS_CHIEF})

#: How long ``start`` waits for a started shell to show its environment in /proc (a few ms in practice).
OBSERVABLE_TIMEOUT_SECONDS = 5.0
#: How long a killed group may take to be gone (a large process's teardown: well under a second in practice).
GONE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class RunRecord:
    """Where to find one run of a task: its process group, and the offset of its first line in the task's log."""

    pgid: int
    log_offset: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"pgid": self.pgid, "log_offset": self.log_offset}


def kill_group(pgid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to process group ``pgid``, which may already be gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_processes(pgid: int) -> Iterator[tuple[Path, list[str]]]:
    """``(/proc/<pid>, its stat fields)`` of every process of group ``pgid``, zombies included."""
    for proc in Path("/proc").iterdir():
        fields = stat_fields(int(proc.name)) if proc.name.isdigit() else None
        if fields is not None and fields[2] == str(pgid):
            yield proc, fields


def group_runs_task(pgid: int, task_name: str) -> bool:
    """True if a live (not zombie) process of group ``pgid`` is task ``task_name`` (its environment says so).

    Guards against process-group ids reused by the system after the task ended.
    """
    marker = f"{env.TASK_NAME}={task_name}".encode()
    for proc, fields in _group_processes(pgid):
        try:
            if fields[0] != "Z" and marker in (proc / "environ").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def group_members(pgid: int) -> dict[int, int]:
    """``{pid: parent pid}`` of the live processes of group ``pgid`` (zombies, ended but not yet reaped, do not count)."""
    return {int(proc.name): int(fields[1]) for proc, fields in _group_processes(pgid) if fields[0] != "Z"}


def group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs."""
    return bool(group_members(pgid))


def group_tearing_down(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs, or is a zombie whose other threads still exit.

    A multi-threaded process's main thread turns zombie before its other threads have ended, and
    its files (sockets) are closed only when the last one has.
    """
    for proc, fields in _group_processes(pgid):
        try:
            if fields[0] != "Z" or len(list((proc / "task").iterdir())) > 1:
                return True
        except OSError:
            continue
    return False


def kill_group_and_wait(pgid: int) -> None:
    """SIGKILL group ``pgid`` and return once it is torn down (or after ``GONE_TIMEOUT_SECONDS``).

    A killed process holds its sockets until the kernel has torn it down, which takes a large TensorFlow
    process a while after its ``sh`` wrapper is reaped: a restart must not find the task's port still bound.
    """
    kill_group(pgid)
    wait_torn_down(pgid)


def wait_torn_down(pgid: int) -> None:
    """Return once group ``pgid`` is torn down (``group_tearing_down``), or after ``GONE_TIMEOUT_SECONDS``."""
    ends = time.monotonic() + GONE_TIMEOUT_SECONDS
    while group_tearing_down(pgid) and time.monotonic() < ends:
        time.sleep(0.01)


def program_pids(pgid: int) -> list[int]:
    """The live processes of group ``pgid`` whose parent is its leader: a task's program under its ``sh`` wrapper."""
    return [pid for pid, parent in group_members(pgid).items() if parent == pgid]


def read_exit(exit_dir: Path, task_name: str) -> int | None:
    """The exit code the task's shell wrote, or None (still running, or killed with its shell)."""
    try:
        return int((exit_dir / task_name).read_text())
    except (OSError, ValueError):
        return None


def read_exits(runs: Mapping[str, RunRecord], exit_dir: Path) -> dict[str, int | None]:
    """``{task: exit code, None while it runs}`` for recorded runs, read from /proc and the exit files only."""
    observed: dict[str, int | None] = {}
    for name, run in runs.items():
        running = group_runs_task(run.pgid, name)
        code = read_exit(exit_dir, name)  # written before the group ends: read after looking at the group
        observed[name] = code if code is not None or running else LOST_EXIT
    return observed


def _await_port(port: int) -> None:
    """Return once nothing listens on ``port`` (as the task's server will bind it), or after ``GONE_TIMEOUT_SECONDS``.

    What ran as the task before may still hold it while the kernel tears it down; a standby binds at once.
    """
    ends = time.monotonic() + GONE_TIMEOUT_SECONDS
    while ports.in_use(port) and time.monotonic() < ends:
        time.sleep(0.01)


@dataclass(frozen=True)
class _Standby:
    """A task's standby: its wrapper (the group leader), whose stdin is the pipe it is called on."""

    process: subprocess.Popen[bytes]
    exit_file: Path


@dataclass(frozen=True)
class _Zygote:
    """The runtime's zygote: its process (the leader of its own group) and the control channel to send it the
    standbys' channels on (closing it tells the zygote no more will come)."""

    process: subprocess.Popen[bytes]
    control: socket.socket


@dataclass
class _Run:
    """One run of a task: the shell this runtime started (``process``), or one adopted from a dead supervisor."""

    record: RunRecord
    process: subprocess.Popen[bytes] | None
    notes: list[str] = field(default_factory=list)


class ProcessRuntime:
    """Runs the plan's tasks as local processes (see the module contract)."""

    def __init__(self, plan: Plan, log_dir: Path, exit_dir: Path,
                 on_runs: Callable[[dict[str, RunRecord]], None] = lambda runs: None,
                 recorded: Mapping[str, RunRecord] | None = None):
        self.plan = plan
        self.log_dir = log_dir
        self.exit_dir = exit_dir
        self.on_runs = on_runs
        self.recorded = dict(recorded or {})
        self._runs: dict[str, _Run] = {}
        self._standbys: dict[str, _Standby] = {}
        self._zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}  # by their environment (``_zygote_env``)
        self._readers: dict[str, LineReader] = {}
        private_dir(log_dir)
        private_dir(exit_dir)

    def log_path(self, task: Task) -> Path:
        return self.log_dir / f"{task.name}.log"

    def start(self, task: Task) -> None:
        _await_port(task.port)
        (self.exit_dir / task.name).unlink(missing_ok=True)
        with open_private(self.log_path(task)) as log:
            offset = log.tell()
            process = (self._call_standby(task) or self._call_forked(task)
                       or self._spawn(task, task.command, self.exit_dir / task.name, log))
        self._await_observable(task, process)
        self._runs[task.name] = _Run(RunRecord(process.pid, offset), process)
        self._reader(task, offset)
        self._record()

    def _call_forked(self, task: Task) -> subprocess.Popen[bytes] | None:
        """A task of the entrypoint with no standby waiting (its first run): a standby of the zygote's, called at once
        (the zygote's one import serves every task); None for another task."""
        channel = self._zygote_channel(task)
        if channel is None:
            return None
        self._prepare(task, channel)
        return self._call_standby(task)

    def prepare(self, tasks: Sequence[Task]) -> None:
        for task in tasks:
            waiting = self._standbys.get(task.name)
            if waiting is not None and waiting.process.poll() is None:
                continue
            self._prepare(task, self._zygote_channel(task))

    def _prepare(self, task: Task, channel: socket.socket | None) -> None:
        """A standby for ``task``; ``channel``: its end of a channel to the zygote, or None (it imports itself)."""
        # a name of its own: a run that became an earlier standby writes its code through that one's link, even
        # after a supervisor that adopted it prepared new standbys
        exit_file = self.exit_dir / f"{task.name}.standby.{secrets.token_hex(4)}"
        try:
            process = self._spawn(task, task.standby_command, exit_file, subprocess.DEVNULL,
                                  stdin=subprocess.PIPE, channel=channel)
        finally:
            if channel is not None:
                channel.close()  # the standby has its copy (and the zygote the other end)
        self._await_observable(task, process)  # as a run: seen as the task's from the moment it is recorded
        self._standbys[task.name] = _Standby(process, exit_file)

    def _zygote_channel(self, task: Task) -> socket.socket | None:
        """The standby's end of a new channel to the zygote of the task's environment (started first if none runs),
        whose end is sent to that zygote; None for a standby that runs another program than the entrypoint's (it
        imports by itself)."""
        command = zygote_command(task.standby_command)
        if command is None:
            return None
        zygote_env = self._zygote_env(task)
        key = tuple(sorted(zygote_env.items()))
        zygote = self._zygotes.get(key)
        if zygote is None or zygote.process.poll() is not None:
            zygote = self._zygotes[key] = self._start_zygote(command, zygote_env)
        return zygote_channel(zygote.control)  # None: it ended meanwhile, this standby imports by itself

    def _start_zygote(self, command: list[str], zygote_env: dict[str, str]) -> _Zygote:
        """A zygote importing under ``zygote_env``: a task's environment but for what names the task (the children
        get their own)."""
        with open_private(self.log_dir / "zygote.log") as log:
            try:
                process, control = start_zygote(command, env=zygote_env, cwd=self.plan.workdir, stdout=log,
                                                stderr=subprocess.STDOUT, process_group=0)
            except OSError as exc:
                raise LaunchError(f"cannot start the standbys' zygote ({command[0]}): {exc}") from None
        return _Zygote(process, control)

    def _zygote_env(self, task: Task) -> dict[str, str]:
        """``task``'s environment but for what tells the tasks apart (each child gets its own): the same for every
        task of a plan whose spec gives its roles no env of their own; a role's env (``LD_PRELOAD``...) may change
        what the import does, so tasks that differ in it get a zygote each."""
        return {k: v for k, v in {**os.environ, **self.plan.task_env(task)}.items() if k not in TASK_IDENTITY}

    def _spawn(self, task: Task, command: Sequence[str], exit_file: Path, output: IO[bytes] | int,
               stdin: int = subprocess.DEVNULL, channel: socket.socket | None = None) -> subprocess.Popen[bytes]:
        """``command`` of ``task`` under the wrapper that writes its exit code to ``exit_file``, in its own group;
        ``channel``: a standby's to the zygote, passed on (``ZYGOTE_FD``)."""
        task_env = {**os.environ, **self.plan.task_env(task)}
        if channel is not None:
            task_env[ZYGOTE_FD] = str(channel.fileno())
        if shutil.which(command[0], path=task_env.get("PATH")) is None:
            raise LaunchError(f"cannot start {task.name} ({command[0]}): no such executable")
        try:
            return subprocess.Popen(
                ["/bin/sh", "-c", WRAPPER, str(exit_file), *command],
                env=task_env, cwd=self.plan.workdir,
                stdin=stdin, stdout=output, stderr=subprocess.STDOUT, process_group=0,
                pass_fds=[channel.fileno()] if channel is not None else (),
            )
        except OSError as exc:
            raise LaunchError(f"cannot start {task.name} ({command[0]}): {exc}") from None

    def _call_standby(self, task: Task) -> subprocess.Popen[bytes] | None:
        """The task's standby, told to become the task; None when it has none running."""
        standby = self._standbys.pop(task.name, None)
        if standby is None or standby.process.poll() is not None:
            return None
        assert standby.process.stdin is not None
        for earlier in self.exit_dir.glob(f"{task.name}.standby.*"):  # of the task's ended runs and standbys
            if earlier != standby.exit_file:
                earlier.unlink(missing_ok=True)
        standby.exit_file.unlink(missing_ok=True)
        standby.exit_file.symlink_to(task.name)
        try:
            standby.process.stdin.write(f"{self.log_path(task)}\n".encode())
            standby.process.stdin.close()
        except OSError:  # it ended meanwhile
            standby.exit_file.unlink(missing_ok=True)
            kill_group(standby.process.pid)
            standby.process.wait()
            return None
        return standby.process

    @staticmethod
    def _await_observable(task: Task, process: subprocess.Popen[bytes]) -> None:
        """Return once ``group_runs_task`` sees the task (or its shell ended), so a recorded run is never taken for lost.

        ``Popen`` returns when ``execve`` closes its close-on-exec pipe, which the kernel does
        before it sets the new image's environment: for a moment ``/proc/<pid>/environ`` is empty.
        """
        ends = time.monotonic() + OBSERVABLE_TIMEOUT_SECONDS
        while process.poll() is None and not group_runs_task(process.pid, task.name) and time.monotonic() < ends:
            time.sleep(0.001)

    def adopt(self, task: Task) -> bool:
        record = self.recorded.get(task.name)
        if record is None:
            return False
        self._runs[task.name] = _Run(record, None)
        self._reader(task, record.log_offset)
        self._record()
        return True

    def poll(self, task: Task) -> int | None:
        run = self._runs.get(task.name)
        if run is None:
            return None
        if run.process is not None:
            code = run.process.poll()
            if code is None:
                return None
            kill_group_and_wait(run.record.pgid)  # whatever the task left behind in its group
            return SIGNAL_EXIT_BASE - code if code < 0 else code
        running = group_runs_task(run.record.pgid, task.name)
        code = read_exit(self.exit_dir, task.name)
        if code is None and running:
            return None
        if running:
            kill_group_and_wait(run.record.pgid)  # ours (checked): whatever the task left behind
        if code is None:
            run.notes.append(f"{task.name} ended while no supervisor watched it, without an exit code "
                             f"(killed with its shell): taken as {LOST_EXIT}")
            code = LOST_EXIT
        return code

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None:
        """SIGTERM every task's group (training tasks save on it), SIGKILL what is left after ``grace_seconds``."""
        runs = {t.name: self._runs[t.name] for t in tasks if t.name in self._runs}
        for name, run in runs.items():
            if run.process is not None or group_runs_task(run.record.pgid, name):
                kill_group(run.record.pgid, signal.SIGTERM)
        ends = time.monotonic() + grace_seconds
        while any(self._running(n, r) for n, r in runs.items()) and time.monotonic() < ends:
            time.sleep(0.05)
        left = [run for name, run in runs.items() if run.process is not None or group_runs_task(run.record.pgid, name)]
        for run in left:  # every group killed first: their teardowns (a large process's takes a while) overlap
            kill_group(run.record.pgid)
        for run in left:
            wait_torn_down(run.record.pgid)
            if run.process is not None:
                run.process.wait()

    def dump_stacks(self, task: Task) -> None:
        """``STACKS_SIGNAL`` to the task's program: the children of its ``sh`` wrapper (the group's leader)."""
        run = self._runs.get(task.name)
        if run is None or not self._running(task.name, run):
            return
        for pid in program_pids(run.record.pgid):
            try:
                os.kill(pid, STACKS_SIGNAL)
            except (ProcessLookupError, PermissionError):
                pass

    def read_stacks(self, task: Task) -> str | None:
        """Every thread's Python stack of the task's program, read with py-spy (``launcher.backends.pyspy``).

        Every process of the task's group but its ``sh`` wrapper is read (the program, and what it
        started, e.g. Python under a shell script); those that are not Python are left out. None,
        with one line on stderr saying why, when no process gave a dump (not permitted, not Python).
        """
        run = self._runs.get(task.name)
        if run is None or not self._running(task.name, run):
            return None
        dump, why = read_local_stacks(sorted(set(group_members(run.record.pgid)) - {run.record.pgid}))
        if dump is None:
            say_none(task.name, why)
        return dump

    def output(self, task: Task) -> list[str]:
        run = self._runs.get(task.name)
        reader = self._readers.get(task.name) or self._reader(task, 0)
        lines = reader.read(final=run is None or not self._running(task.name, run))
        if run is not None and run.notes:
            lines, run.notes = [*lines, *run.notes], []
        return lines

    def close(self) -> None:
        """Every task is stopped: no process group left for ``down`` to kill later; the standbys have ended when it
        returns (their groups torn down, not only their shells reaped: a signalled process dies when next scheduled)."""
        for standby in self._standbys.values():
            kill_group_and_wait(standby.process.pid)
            standby.process.wait()
            standby.exit_file.unlink(missing_ok=True)
        self._standbys.clear()
        for zygote in self._zygotes.values():  # every task is stopped: nothing they forked runs
            zygote.control.close()
            kill_group_and_wait(zygote.process.pid)
            zygote.process.wait()
        self._zygotes.clear()
        self.on_runs({})

    def _running(self, name: str, run: _Run) -> bool:
        if run.process is not None:
            return run.process.poll() is None
        return group_runs_task(run.record.pgid, name)

    def _reader(self, task: Task, offset: int) -> LineReader:
        reader = self._readers[task.name] = LineReader(self.log_path(task))
        reader.offset = offset
        return reader

    def _record(self) -> None:
        self.on_runs({name: run.record for name, run in self._runs.items()})
