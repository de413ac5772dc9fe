"""How a task is asked for the stacks of all its threads: the signal tasks and supervisors share, and the cap on
any stack text tfcluster reads.

Contract: a task that handles ``STACKS_SIGNAL`` (the entrypoint and programs
using ``launcher.progress``: ``faulthandler`` writes every thread's Python
stack on its stderr, even while the main thread is blocked in native code)
says so once, with the ``stacks_on_signal`` event; only such tasks are sent the
signal, whose default action would end a process. ``capped(text)`` is ``text`` cut to ``MAX_STACK_BYTES``
(UTF-8), saying so: every reader of stacks or of a command's output (py-spy, ``docker exec``, ``pods/exec``,
the stack endpoint, the lines a dump wrote) keeps at most that much of one task's reading.
"""

from __future__ import annotations

import signal

STACKS_SIGNAL = signal.SIGUSR1
#: The most of one task's stacks (or of one command's output) that is kept: a few hundred threads' dumps.
MAX_STACK_BYTES = 1 << 20


def capped(text: str, limit: int = MAX_STACK_BYTES) -> str:
    """``text`` if it is at most ``limit`` UTF-8 bytes, else its first bytes and a last line saying it was cut
    (the whole at most ``limit`` bytes)."""
    encoded = text.encode(errors="replace")
    if len(encoded) <= limit:
        return text
    note = f"\n... cut: {len(encoded)} bytes, the first kept\n"
    kept = encoded[:max(0, limit - len(note.encode()))].decode(errors="ignore")
    return (kept + note).encode()[:limit].decode(errors="ignore")
