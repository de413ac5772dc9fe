"""``python -m launcher.worker.standby [--on-signal] [ARGS...]``: a task's standby, an interpreter ready to become the task.

Contract: started with the task's environment and directory, it imports what the entrypoint imports,
creates no TensorFlow context, and waits. Once called it emits ``warm_start`` and runs ``python -m
launcher.worker ARGS`` in this process, whose exit code is its own. Called by a line on stdin (local:
the log file to append to; EOF first ends it with 0; it imports in a thread at ``SCHED_IDLE``, the main
thread, which runs the task, keeps the normal priority), or with
``--on-signal`` (containers) by ``CALL_SIGNAL`` after printing ``READY_LINE``
(``launcher.protocol.standby``). Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path

from launcher.protocol import env
from launcher.protocol.standby import CALL_SIGNAL, ON_SIGNAL, READY_LINE

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


if __name__ == "__main__":
    main(sys.argv[1:])
