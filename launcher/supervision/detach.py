"""Starting a process that outlives the command that starts it: forked from a lean command, else a new interpreter.

Contract: ``start(argv, log, run)`` starts a process in a session of its own,
stdin from /dev/null, stdout and stderr appended to the open ``log``, whose
command line (``/proc/<pid>/cmdline``, what ``ps`` shows) names ``argv``, and
returns its pid and a non-blocking ``ended()``.

- When this process declared itself lean (``fork_from_this_process``: the
  ``tfcluster`` command, which holds nothing but the controller) and runs one
  thread, the new process is a fork of it that calls ``run()`` at once: no
  new interpreter and imports (about 0.2 s of every launch here). The fork
  takes ``argv`` as its title (setproctitle), closes every other descriptor
  it inherited, and exits with ``run()``'s return value (1 and a traceback
  in ``log`` if it raised) by ``end``, running the exit handlers it registered
  itself, never the command's (whose temporary files are the command's).
- Otherwise (a library caller: a notebook, a test, a service, whose memory a
  fork would pin and whose other threads it would not carry) it executes
  ``argv``, which must do what ``run`` does, and end by ``end``.

``end(code)`` ends the process with ``code`` as the interpreter's exit would
(its ``atexit`` handlers run, stdout and stderr are flushed) but without the interpreter's
finalization, which aborts the process (134, "could not acquire lock for
<stderr> ... possibly due to daemon threads") when a daemon thread (a
runtime's log follower) holds stderr as it ends: a pod's Job counts that as a
failure, and a supervisor pod that left its tasks (143) met it in CI.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, NoReturn

import setproctitle

_lean = False


def fork_from_this_process() -> None:
    """Declare this process lean: processes ``start`` starts from now on are forked from it."""
    global _lean
    _lean = True


@dataclass(frozen=True)
class Detached:
    """A started process: its pid, and whether it has ended (its status is collected when it has)."""

    pid: int
    ended: Callable[[], bool]


def start(argv: list[str], log: BinaryIO, run: Callable[[], int]) -> Detached:
    if _lean and threading.active_count() == 1:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _be_detached(argv, log.fileno(), run)
        return Detached(pid, lambda: _reaped(pid))
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    return Detached(process.pid, lambda: process.poll() is not None)


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True  # collected already


def _be_detached(argv: list[str], log: int, run: Callable[[], int]) -> NoReturn:
    """The forked child: become ``argv`` in a session of its own writing to ``log``, run, exit; never return."""
    code = 1
    atexit._clear()  # the command's exit handlers are the command's to run; ``end`` runs the ones ``run`` registers
    try:
        setproctitle.setproctitle(" ".join(argv))
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the command's pipes and files: whoever reads them sees EOF
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, never closed
        sys.stdout = open(1, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
        code = run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the log, then the process ends like an interpreter would
        traceback.print_exc()
    finally:
        end(code)


def end(code: int) -> NoReturn:
    """End this process with ``code`` (see the module contract): exit handlers, flushed output, no finalization."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
