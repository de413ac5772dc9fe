"""Stacks of a local Python program read from outside with ``py-spy``: no change to the program, no signal.

Contract: ``read_stacks(pids)`` runs ``py-spy dump --pid PID --full-filenames``
(an argument list, as the caller's user, each bounded by ``PYSPY_SECONDS``)
for each of ``pids`` and returns ``(dump, problem)``: the dumps of those that
are Python programs (py-spy's header naming the process and Python, then
every thread's frames, most recent call first; the target is paused for the
few milliseconds this takes), and one line saying why there is none when no
pid gave one: py-spy is not installed, reading another process is not
permitted (py-spy needs ptrace rights over it: the same user, and under
``kernel.yama.ptrace_scope`` >= 1 only the target's ancestors or holders of
``CAP_SYS_PTRACE`` have them, and py-spy is not the task's ancestor), the
process is not Python, or py-spy did not answer in time (it is killed). It
never raises for any of these and never waits longer than
``PYSPY_SECONDS`` per pid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path

#: The longest one ``py-spy dump`` may take (it needs milliseconds); then it is killed and the task has no stacks.
PYSPY_SECONDS = 10.0
#: Yama's setting: 0 any process of the same user may be read, 1 only descendants, 2 only with CAP_SYS_PTRACE, 3 none.
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")


def pyspy_binary() -> str | None:
    """py-spy next to this Python's scripts (it ships as a wheel with tfcluster), else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "py-spy"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("py-spy")


def read_stacks(pids: Sequence[int]) -> tuple[str | None, str]:
    """``(dump, "")`` if some of ``pids`` gave a dump, else ``(None, why)`` (see the module contract)."""
    binary = pyspy_binary()
    if binary is None:
        return None, "py-spy is not installed (pip install py-spy)"
    dumps, problems = [], []
    for pid in pids:
        try:
            done = subprocess.run([binary, "dump", "--pid", str(pid), "--full-filenames"], capture_output=True, text=True,
                                  timeout=PYSPY_SECONDS, env={**os.environ, "RUST_BACKTRACE": "0"}, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            problems.append(f"py-spy did not answer within {PYSPY_SECONDS:.0f} s")
            continue
        except OSError as exc:
            problems.append(f"cannot run py-spy: {exc}")
            continue
        if done.returncode == 0 and done.stdout.strip():
            dumps.append(done.stdout.rstrip())
        else:
            problems.append(_why(done.stderr))
    if dumps:
        return "\n\n".join(dumps), ""
    return None, "; ".join(dict.fromkeys(problems)) or "no program runs under the task's shell"


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
