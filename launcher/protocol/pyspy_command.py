"""How ``py-spy`` reads a Python program's stacks from outside: the one command, environment and time bound
shared by the backends (``launcher.backends.pyspy``) and a Kubernetes task's agent (``launcher.worker.agent``).

Contract: ``dump_command(pid, binary)`` is the argument list of one dump (full file names); ``PYSPY_ENV`` is added
to its environment; a run past ``PYSPY_SECONDS`` is killed. ``pyspy_binary()`` finds py-spy beside this Python's
scripts (it ships as a wheel with tfcluster), else on PATH, else None.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

#: The longest one ``py-spy dump`` may take (it needs milliseconds); then it is killed and the task has no stacks.
PYSPY_SECONDS = 10
#: py-spy's environment: its errors without a Rust backtrace.
PYSPY_ENV = {"RUST_BACKTRACE": "0"}


def dump_command(pid: int, binary: str = "py-spy") -> list[str]:
    return [binary, "dump", "--pid", str(pid), "--full-filenames"]


def pyspy_binary() -> str | None:
    beside = Path(sysconfig.get_path("scripts")) / "py-spy"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("py-spy")
