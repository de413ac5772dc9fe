"""Stack dumps on request: ``faulthandler`` on ``launcher.protocol.stacks_signal.STACKS_SIGNAL``, announced once.

Contract: ``dump_stacks_on_signal(reporter)`` makes the process write the
Python stack of every thread on stderr when it gets the signal (from the C
handler: it works while the main thread waits in TensorFlow's native code,
e.g. a collective) and emits ``stacks_on_signal`` so supervisors know they
may send it. Calling it again does nothing.
"""

from __future__ import annotations

import faulthandler
import sys

from launcher.protocol.events import StacksOnSignal
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.worker.reporter import Reporter

_registered: list[bool] = []


def dump_stacks_on_signal(reporter: Reporter) -> None:
    if _registered:
        return
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
    _registered.append(True)
    reporter.emit(StacksOnSignal(signal=STACKS_SIGNAL.name))
