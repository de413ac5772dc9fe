"""Python source for task scripts that are ordered by marker files, never by sleeping.

Contract: each function returns statements for ``python -c``. ``BLOCK`` runs
until the task is stopped (a signal). ``wait_for(path)`` blocks until
``path`` exists, polling, and exits non-zero naming the file after
``WAIT_SECONDS`` (a bound so a broken test cannot hang, never an order);
``touch(path)`` creates it. ``first_run(marker, first, later)`` runs
``first`` on the task's first run (creating ``marker``) and ``later`` on the
runs after it. The test (or another task) orders events by creating files.
"""

from __future__ import annotations

from pathlib import Path

#: How long a gate waits before it fails the task.
WAIT_SECONDS = 300
BLOCK = "import signal; signal.pause()"


def touch(path: Path) -> str:
    return f"import pathlib; pathlib.Path({str(path)!r}).touch()"


def wait_for(path: Path) -> str:
    return (f"import pathlib, sys, time\n_gate, _ends = pathlib.Path({str(path)!r}), time.monotonic() + {WAIT_SECONDS}\n"
            "while not _gate.exists():\n"
            "    if time.monotonic() > _ends:\n        sys.exit(f'gave up waiting for {_gate}')\n"
            "    time.sleep(0.05)")


def first_run(marker: Path, first: str, later: str = "pass") -> str:
    def indent(source: str) -> str:
        return "\n".join("    " + line for line in source.splitlines())

    return (f"import pathlib\n_marker = pathlib.Path({str(marker)!r})\n"
            f"if not _marker.exists():\n    _marker.touch()\n{indent(first)}\nelse:\n{indent(later)}")
