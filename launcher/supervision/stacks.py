"""Stack dumps of tasks: which output lines are one, which task they point at, and where they are kept.

Contract: a task asked for its stacks (``Runtime.dump_stacks``: SIGUSR1,
which the entrypoint and ``launcher.progress`` route to ``faulthandler``)
writes them on stderr in ``faulthandler``'s format; ``is_stack_line`` tells
those lines from the task's other output, so they go to the dump file and
not into its status. ``suspects(dumps)`` names the tasks a stall is most
likely stuck in, with why, from every task's dump (None: it wrote none):

1. a task with a thread running Python inside a TensorFlow op
   (``tf.py_function``, ``tf.numpy_function``, ``Dataset.from_generator``:
   ``script_ops``): its input pipeline or step is stuck in Python while its
   peers wait in the step's collectives;
2. else, when some tasks answered, those that did not (frozen, gone, or a
   program without the handler);
3. else nobody in particular.

``evidence(silent, timeout, names, why, directory)`` is the one line a stall
is described by (every supervisor, and the Kubernetes watch), and
``write_stacks(root, number, dumps)`` keeps a stall's dumps as
``<root>/stall-<number>/<task>.txt``, owner-only like every state file (it
raises ``OSError``); the rest is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.supervision.statefile import private_dir, write_private

#: faulthandler's lines: a thread's header, a frame, and the markers it writes for odd stacks.
STACK_LINE = re.compile(
    r"^(?:(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):"
    r"|Stack \(most recent call first\):"
    r"|  File \".*\", line \d+ in .*"
    r"|  <no Python frame>|  \.\.\.)$"
)
#: A thread's header: one per thread of a dump.
THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$")
#: TensorFlow's module that runs Python inside ops (py_function, numpy_function, from_generator).
INSIDE_AN_OP = "/tensorflow/python/ops/script_ops.py"


def is_stack_line(line: str) -> bool:
    return STACK_LINE.match(line.rstrip("\r\n")) is not None


def threads(dump: str) -> list[str]:
    """The dump cut into one text per thread."""
    found: list[list[str]] = []
    for line in dump.splitlines():
        if THREAD_HEADER.match(line) or not found:
            found.append([])
        found[-1].append(line)
    return ["\n".join(lines) for lines in found if lines]


def in_python_op(dump: str) -> bool:
    """True if a thread of ``dump`` runs Python code called from inside a TensorFlow op."""
    return any(INSIDE_AN_OP in thread for thread in threads(dump))


def suspects(dumps: Mapping[str, str | None]) -> tuple[tuple[str, ...], str]:
    """The tasks a stall likely sits in, and why (see the module contract); ``()`` with a reason when none."""
    in_op = tuple(name for name, dump in dumps.items() if dump and in_python_op(dump))
    if in_op:
        return in_op, "a thread runs Python inside a TensorFlow op (tf.py_function / from_generator) while the others wait"
    silent = tuple(name for name, dump in dumps.items() if not dump)
    if silent and len(silent) < len(dumps):
        return silent, "it wrote no stacks when asked (frozen, gone, or a program without the handler)"
    return (), "no task stands out: read the stacks"


#: What a task's file holds when it gave no stacks.
NO_STACKS = "(no stacks: the task did not answer, or its program does not dump them on request)"


def evidence(silent_seconds: float, timeout_seconds: float, names: Sequence[str], why: str,
             directory: str | None) -> str:
    return (f"no progress for {silent_seconds:.0f} s (stall timeout {timeout_seconds:.0f} s); "
            f"suspected: {', '.join(names) or 'none'} ({why})" + (f"; stacks in {directory}" if directory else ""))


def write_stacks(root: Path, number: int, dumps: Mapping[str, str | None]) -> str:
    """Each task's dump as ``<root>/stall-<number>/<task>.txt``; the directory."""
    directory = root / f"stall-{number}"
    private_dir(directory)
    for name, dump in dumps.items():
        write_private(directory / f"{name}.txt", (dump or NO_STACKS) + "\n")
    return str(directory)
