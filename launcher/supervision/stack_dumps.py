"""Stack dumps of tasks: which output lines are one, which task they point at, and where they are kept.

Contract: a task asked for its stacks (``Runtime.dump_stacks``: SIGUSR1,
which the entrypoint and ``launcher.progress`` route to ``faulthandler``)
writes them on stderr in ``faulthandler``'s format; ``is_stack_line`` tells
those lines from the task's other output, so they go to the dump file and
not into its status. ``in_python_op(dump)`` tells a dump with a thread
running Python inside a TensorFlow op (``tf.py_function``,
``tf.numpy_function``, ``Dataset.from_generator``: ``script_ops``), which
``launcher.supervision.stack_evidence`` reads a suspected stall by.
``write_stacks(root, number, dumps)`` keeps a stall's dumps as
``<root>/stall-<number>/<task>.txt``, owner-only like every state file (it
raises ``OSError``); ``bounded_text(number, dumps, limit)`` is the same dumps as one text of at most ``limit``
bytes (each task's cut to its share, saying so), for a store with a size limit; the rest is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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


#: What a task's file holds when it gave no stacks.
NO_STACKS = "(no stacks: the task did not answer, or its program does not dump them on request)"


def write_stacks(root: Path, number: int, dumps: Mapping[str, str | None]) -> str:
    """Each task's dump as ``<root>/stall-<number>/<task>.txt``; the directory."""
    directory = root / f"stall-{number}"
    private_dir(directory)
    for name, dump in dumps.items():
        write_private(directory / f"{name}.txt", (dump or NO_STACKS) + "\n")
    return str(directory)


def bounded_text(number: int, dumps: Mapping[str, str | None], limit: int) -> str:
    """A stall's dumps as one text of at most ``limit`` UTF-8 bytes: a header per task, each dump cut to an
    equal share of what is left after the headers, with a line saying how much of it was cut."""
    heads = {name: f"== {name} (stall {number})\n" for name in dumps}
    share = max(0, limit - sum(len(head.encode()) for head in heads.values())) // max(1, len(dumps))
    parts = []
    for name, dump in dumps.items():
        body = (dump or NO_STACKS).rstrip("\n") + "\n"
        encoded = body.encode()
        if len(encoded) > share:
            note = f"... cut: {len(encoded)} bytes, the first kept\n"
            kept = encoded[:max(0, share - len(note.encode()))].decode(errors="ignore")
            body = (kept + note) if len(note.encode()) <= share else ""
        parts.append(heads[name] + body)
    return "".join(parts).encode()[:limit].decode(errors="ignore")
