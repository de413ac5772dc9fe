"""Stacks of a Python program read from outside with ``py-spy``: no change to the program, no signal.

Contract: ``read_stacks(pids, run)`` runs ``dump_command(pid)`` through ``run`` (``local_runner``:
here) for each pid and returns ``(dump, problem)``: the dumps of the Python programs, and one line
saying why there is none (no ptrace right, not Python, no answer within ``PYSPY_SECONDS``); every output and
the dump are ``capped``.
``read_container_stacks(exec_in)`` does the same inside a container (``docker exec``,
``pods/exec``), adding no capability. ``say_none(task, why)`` reports the line. Nothing here raises
for these cases. The command, its environment and time bound: ``launcher.protocol.pyspy_command``.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from launcher.protocol.pyspy_command import PYSPY_ENV, PYSPY_SECONDS, dump_command, pyspy_binary
from launcher.protocol.stacks_signal import capped

log = logging.getLogger(__name__)

#: Yama's setting: 0 any process of the same user may be read, 1 only descendants, 2 only with CAP_SYS_PTRACE, 3 none.
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
#: ``timeout``'s exit codes: the command was killed (``-s KILL``), could not be run, was not found.
KILLED, NOT_RUNNABLE, NOT_FOUND = 137, 126, 127


class Ran(NamedTuple):
    """What one py-spy run gave."""

    returncode: int
    stdout: str
    stderr: str


#: Runs a command (py-spy's; in a container: any) and returns what it gave, or one line saying why it could not.
Runner = Callable[[list[str]], "Ran | str"]


def local_runner(command: list[str]) -> Ran | str:
    """Runs ``command`` here, as this user, killed after ``PYSPY_SECONDS``."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=PYSPY_SECONDS,
                              env={**os.environ, **PYSPY_ENV}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"py-spy did not answer within {PYSPY_SECONDS} s"
    except OSError as exc:
        return f"cannot run py-spy: {exc}"
    # Decoded as they are: text mode's universal newlines would make a task's own \r (in its command line,
    # which py-spy prints) a line break, where the terminal sink shows it escaped.
    return Ran(done.returncode, capped(done.stdout.decode(errors="replace")), capped(done.stderr.decode(errors="replace")))


def read_local_stacks(pids: Sequence[int]) -> tuple[str | None, str]:
    """``read_stacks`` of processes of this machine, with the py-spy installed beside tfcluster."""
    binary = pyspy_binary()
    if binary is None:
        return None, "py-spy is not installed (pip install py-spy)"
    return read_stacks(pids, local_runner, binary)


def read_container_stacks(exec_in: Runner) -> tuple[str | None, str]:
    """``read_stacks`` of every process of a container, through ``exec_in`` (see the module contract)."""
    listing = exec_in(["ls", "/proc"])
    if isinstance(listing, str):
        return None, listing
    if listing.returncode != 0:
        return None, f"cannot list the container's processes: {(listing.stderr or listing.stdout).strip()}"
    pids = sorted(int(entry) for entry in listing.stdout.split() if entry.isdigit())
    return read_stacks(pids, lambda command: _bounded(exec_in, command))


def _bounded(exec_in: Runner, command: list[str]) -> Ran | str:
    ran = exec_in(["timeout", "-s", "KILL", str(PYSPY_SECONDS), *command])
    if isinstance(ran, str):
        return ran
    if ran.returncode == KILLED:
        return f"py-spy did not answer within {PYSPY_SECONDS} s"
    if ran.returncode in (NOT_RUNNABLE, NOT_FOUND):
        return f"py-spy is not in the task's image (the images `tfcluster build` makes ship it): {ran.stderr.strip()}"
    return ran


def read_stacks(pids: Sequence[int], run: Runner, binary: str = "py-spy") -> tuple[str | None, str]:
    """``(dump, "")`` if some of ``pids`` gave a dump, else ``(None, why)`` (see the module contract)."""
    dumps, problems = [], []
    for pid in pids:
        ran = run(dump_command(pid, binary))
        if isinstance(ran, str):
            problems.append(ran)
        elif ran.returncode == 0 and ran.stdout.strip():
            dumps.append(ran.stdout.rstrip())
        else:
            problems.append(_why(ran.stderr))
    if dumps:
        return capped("\n\n".join(dumps)), ""
    return None, "; ".join(dict.fromkeys(problems)) or "no program runs in the task"


def say_none(task: str, why: str) -> None:
    """The one line saying why ``task`` gave no stacks: a warning of this module's logger, which a command
    shows on stderr through its terminal sink (``launcher.cli.terminal``) and a detached supervisor in its log."""
    log.warning("tfcluster: no stacks of %s: %s", task, why)


def _why(stderr: str) -> str:
    """py-spy's error in one line; for a refusal, the rule that refused it (never py-spy's advice to use sudo)."""
    error = next((line.removeprefix("Error: ").strip() for line in stderr.splitlines() if line.strip()), "no output")
    if "permission denied" in stderr.lower() or "operation not permitted" in stderr.lower():
        try:
            scope = f"kernel.yama.ptrace_scope={PTRACE_SCOPE.read_text().strip()}"
        except OSError:
            scope = "no Yama ptrace_scope here"
        return (f"not permitted to read the process ({scope}): py-spy needs ptrace rights over it, which only "
                "the same user has, and under ptrace_scope >= 1 only its ancestors or holders of CAP_SYS_PTRACE")
    if "python version" in error.lower():
        return f"not a Python program ({error})"
    return f"py-spy: {error}"
