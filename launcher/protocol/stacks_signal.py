"""How a task is asked for the stacks of all its threads: the signal tasks and supervisors share.

Contract: a task that handles ``STACKS_SIGNAL`` (the entrypoint and programs
using ``launcher.progress``: ``faulthandler`` writes every thread's Python
stack on its stderr, even while the main thread is blocked in native code)
says so once, with the ``stacks_on_signal`` event; only such tasks are sent the
signal, whose default action would end a process.
"""

from __future__ import annotations

import signal

STACKS_SIGNAL = signal.SIGUSR1
