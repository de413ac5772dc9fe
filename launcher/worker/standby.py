"""``python -m launcher.worker.standby [--on-signal] [ARGS...]``: a task's standby, an interpreter ready to become the task.

Contract: started with the task's environment and directory, it imports what the entrypoint imports,
creates no TensorFlow context, and waits. Once called it emits ``warm_start`` and runs ``python -m
launcher.worker ARGS`` in this process, whose exit code is its own. Called by a line on stdin (local:
the log file to append to; EOF first ends it with 0; it imports in a thread at ``SCHED_IDLE``, the main
thread, which runs the task, keeps the normal priority), or with
``--on-signal`` (containers, Slurm steps) by ``CALL_SIGNAL`` after printing ``READY_LINE``
(``launcher.protocol.standby``; given ``LOG_ENV``, once called its output goes to that file, as a called local
standby's to its line's). Given ``ZYGOTE_FD`` (local), it imports nothing: once called it hands
its argv, env, directory, process group and streams to the zygote (``launcher.worker.zygote``), whose
forked child becomes the task in its process group, and exits as that child did (its code, or its
signal); meanwhile it ignores ``GROUP_SIGNALS`` (the group's: the child gets them too) and passes
``STACKS_SIGNAL`` on to the child. A zygote that ended before forking leaves the task to this process
(it imports then); one that ended after gives ``LOST_EXIT`` once the child has ended.
Why standbys and the zygote: docs/architecture.md (Decisions).
"""

from __future__ import annotations

import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from launcher.protocol import env
from launcher.protocol.exitcodes import LOST_EXIT, SIGNAL_EXIT_BASE
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.protocol.standby import CALL_SIGNAL, GROUP_SIGNALS, LOG_ENV, ON_SIGNAL, READY_LINE, ZYGOTE_FD, answer

#: The entrypoint the standby becomes.
ENTRYPOINT_MODULE = "launcher.worker"


def main(args: list[str]) -> None:
    started = time.monotonic()
    on_signal = args[:1] == [ON_SIGNAL]
    os.environ.setdefault(env.LEGACY_KERAS, "1")
    if on_signal:
        args = args[1:]
        # blocked here, so in every thread the imports start: the call waits, pending, for sigwait below
        signal.pthread_sigmask(signal.SIG_BLOCK, {CALL_SIGNAL})
        print(READY_LINE, flush=True)
        _import()
        imported = time.monotonic()
        signal.sigwait({CALL_SIGNAL})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {CALL_SIGNAL})
        if log := os.environ.pop(LOG_ENV, ""):
            _become(log)
    elif ZYGOTE_FD in os.environ:
        channel = socket.socket(fileno=int(os.environ.pop(ZYGOTE_FD)))
        line = sys.stdin.buffer.readline().decode().strip()
        if not line:
            os._exit(0)
        called = time.monotonic()
        _become(line)
        code = _forked_by_zygote(channel, args, called)
        if code is not None:
            _exit_as(code)
        sys.argv = [sys.argv[0], *args]  # no zygote to fork it: the task runs here, and imports now
        runpy.run_module(ENTRYPOINT_MODULE, run_name="__main__", alter_sys=True)
        return
    else:
        done: list[float] = []
        importer = threading.Thread(target=_import_idle, args=(done,), daemon=True, name="standby-import")
        importer.start()
        line = sys.stdin.buffer.readline().decode().strip()
        if not line:
            os._exit(0)
        _set_priority(os.SCHED_OTHER)  # the import thread's, if it still runs (a privileged process can)
        importer.join()
        imported = done[0] if done else time.monotonic()
        _become(line)
    from launcher.protocol import events  # not at the top: pydantic at the normal priority (the imports have it now)

    task = os.environ.get(env.TASK_NAME, "")
    events.emit(events.WarmStart(import_seconds=round(imported - started, 3),
                                 waited_seconds=round(max(0.0, time.monotonic() - imported), 3)), task, sys.stdout,
                events.task_token())
    sys.argv = [sys.argv[0], *args]
    runpy.run_module(ENTRYPOINT_MODULE, run_name="__main__", alter_sys=True)


def _import() -> None:
    import launcher.worker.main  # noqa: F401  (TensorFlow and tf_keras with it)


def _import_idle(done: list[float]) -> None:
    """The imports in this thread alone at ``SCHED_IDLE`` (the threads they start inherit it); the main thread keeps
    the normal priority, which an unprivileged process could not take back (``RLIMIT_NICE``), for the task."""
    _set_priority(os.SCHED_IDLE, [threading.get_native_id()])
    _import()
    done.append(time.monotonic())


def _set_priority(policy: int, threads: list[int] | None = None) -> None:
    """``threads`` (default: every thread of this process but the main one) to ``policy``; a thread started
    meanwhile inherits its creator's."""
    for _ in range(1 if threads else 2):
        for tid in threads or [int(t) for t in os.listdir("/proc/self/task") if int(t) != os.getpid()]:
            try:
                os.sched_setscheduler(tid, policy, os.sched_param(0))
            except (ProcessLookupError, PermissionError):
                pass  # ended meanwhile; or a policy this system refuses: the standby only runs slower


def _become(log: str) -> None:
    """Standard streams as a fresh task has them: stdin from /dev/null, stdout and stderr appended to ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(Path(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def _forked_by_zygote(channel: socket.socket, args: list[str], called: float) -> int | None:
    """The exit code (negative: killed by that signal) of the task the zygote forked for this standby; None if the
    zygote ended (or refused) before it forked."""
    request = {"argv": [sys.argv[0], *args], "env": dict(os.environ), "cwd": os.getcwd(), "pgid": os.getpgrp(),
               "called": called}
    child: list[int] = []  # its pid, once known; a STACKS_SIGNAL before that waits for it
    pending: list[bool] = []
    for sig in GROUP_SIGNALS:  # the group's signals reach the child itself
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(STACKS_SIGNAL, lambda *_: _signal(child[0]) if child else pending.append(True))
    try:
        socket.send_fds(channel, [json.dumps(request).encode()], [0, 1, 2])
        kind, pid = answer(channel.recv(64))
    except OSError:
        kind, pid = "", 0
    if kind != "pid":
        for sig in (*GROUP_SIGNALS, STACKS_SIGNAL):  # this process becomes the task: as it starts
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        return None
    child.append(pid)
    if pending:
        _signal(pid)
    try:
        kind, status = answer(channel.recv(64))
    except OSError:
        kind, status = "", 0
    if kind == "exit":
        return os.waitstatus_to_exitcode(status)
    _await_end(pid)  # the zygote was killed: the child's code is lost with it
    return LOST_EXIT


def _signal(pid: int) -> None:
    """``STACKS_SIGNAL`` on to the task (this process, the wrapper's child, is the one the runtime signals)."""
    try:
        os.kill(pid, STACKS_SIGNAL)
    except ProcessLookupError:
        pass


def _await_end(pid: int) -> None:
    """Return once process ``pid`` (not this process's child) has ended."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    select.select([pidfd], [], [])
    os.close(pidfd)


def _exit_as(code: int) -> None:
    """End as the task ended: with its code, or killed by its signal (the wrapper records 128+N either way)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # no handler can be set for either
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = SIGNAL_EXIT_BASE - code
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
