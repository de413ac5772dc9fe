"""A Kubernetes task's main process (after tini, PID 1): it runs the task's program as its child, passes on
every signal it gets, ends as the child ended, and serves the child's stacks on the stack endpoint.

Contract: ``python -m launcher.worker.agent -- PROGRAM [ARG...]`` starts PROGRAM (same environment, working
directory and stdio) and sends it every ``FORWARDED`` signal the agent gets (one that came before the child
existed, once it does): SIGTERM above all, by which a preempted task saves. It exits with the child's exit code,
128+N for a child ended by signal N (as tini and a shell report it: 143 for SIGTERM, 137 for SIGKILL); a PROGRAM
that cannot be started is one line on stderr and 127 (not found) or 126. Where its environment names
``STACKS_PORT`` and the run's event token, it serves ``launcher.protocol.stack_endpoint`` there: the answer is
``py-spy dump`` of the child and of each of its descendants that runs Python (``child_stacks``). py-spy reads
them from outside, so it answers while the program's main thread holds the GIL or waits in native code, and
needs no capability: the kernel (Yama ``ptrace_scope`` 1, the default) lets a process read its own descendants.
It imports only the standard library and ``launcher.protocol`` (and this package's ``stack_server``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.protocol.env import EVENT_TOKEN
from launcher.protocol.pyspy_command import PYSPY_ENV, PYSPY_SECONDS, dump_command, pyspy_binary
from launcher.protocol.stack_endpoint import STACKS_PORT
from launcher.worker.stack_server import serve_stacks

#: The signals the agent passes on to its child (SIGKILL and SIGSTOP cannot be caught; the kubelet's SIGKILL
#: after the grace ends the whole container).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: The exit codes of a program that cannot be started, as a shell has them.
NOT_RUNNABLE, NOT_FOUND = 126, 127
USAGE = "usage: python -m launcher.worker.agent -- PROGRAM [ARG...]"


def descendants(root: int, proc: Path = Path("/proc")) -> list[int]:
    """``root`` and every process below it, parents first (read from ``/proc/<pid>/stat``)."""
    children: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()  # after "pid (comm)": state, ppid, ...
        except OSError:  # it ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found = [root]
    for pid in found:
        found += sorted(children.get(pid, []))
    return found


def child_stacks(child: int) -> str:
    """``py-spy dump`` of ``child`` and of each of its descendants that runs Python; "" if none could be read."""
    binary = pyspy_binary()
    if binary is None:
        return ""
    dumps = []
    for pid in descendants(child):
        try:
            done = subprocess.run(dump_command(pid, binary), capture_output=True, timeout=PYSPY_SECONDS,
                                  env={**os.environ, **PYSPY_ENV}, stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError):
            continue
        if done.returncode == 0 and done.stdout.strip():
            dumps.append(done.stdout.decode(errors="replace").rstrip())
    return "\n\n".join(dumps) + "\n" if dumps else ""


def run(program: Sequence[str], environ: Mapping[str, str] = os.environ) -> int:
    """``program`` run as the agent's child (see the module contract); its exit code."""
    started: list[subprocess.Popen[bytes]] = []
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if started:
            started[0].send_signal(signum)  # a no-op once the child was reaped
        else:
            early.append(signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    try:
        child = subprocess.Popen(list(program))
    except OSError as exc:
        print(f"tfcluster agent: cannot run {program[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_RUNNABLE
    started.append(child)
    for pending in early:
        child.send_signal(pending)
    if (port := environ.get(STACKS_PORT, "")).isdigit():
        serve_stacks(environ.get(EVENT_TOKEN, ""), int(port), lambda: child_stacks(child.pid))
    code = child.wait()
    return 128 - code if code < 0 else code


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    program = args[1:] if args[:1] == ["--"] else args
    if not program:
        print(USAGE, file=sys.stderr)
        return 2
    return run(program)


if __name__ == "__main__":
    sys.exit(main())
