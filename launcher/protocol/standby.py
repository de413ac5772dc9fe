"""How a runtime calls a task's standby (``launcher.worker.standby``) to become the task.

Contract: a standby started with ``ON_SIGNAL`` as its first argument (a
container's: the runtime cannot hold a pipe to it) prints ``READY_LINE`` on
stdout once ``CALL_SIGNAL`` would reach its handler, and becomes the task on
that signal; a runtime calls only a standby that printed it, since the
signal's default action would end the process. Without ``ON_SIGNAL`` it is
called with a line on its stdin (local processes).
"""

from __future__ import annotations

import signal

#: First argument of a standby called by ``CALL_SIGNAL`` instead of a line on its stdin.
ON_SIGNAL = "--on-signal"
CALL_SIGNAL = signal.SIGUSR2
READY_LINE = f"tfcluster standby: ready, becomes the task on {CALL_SIGNAL.name}"
