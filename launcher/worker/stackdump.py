"""Stack dumps on request: ``faulthandler`` on ``launcher.protocol.stacks_signal.STACKS_SIGNAL``, announced once.

Contract: ``dump_stacks_on_signal(reporter, environ)`` makes the process write the
Python stack of every thread on stderr when it gets the signal (from the C
handler: it works while the main thread waits in TensorFlow's native code,
e.g. a collective) and emits ``stacks_on_signal`` so supervisors know they
may ask for them; where ``environ`` names a ``STACKS_PORT`` (Kubernetes), it also serves them there to the
holder of the run's token (``launcher.worker.stack_server``). Calling it again does nothing.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Mapping

from launcher.protocol.events import StacksOnSignal
from launcher.protocol.stack_endpoint import STACKS_PORT
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.worker.reporter import Reporter
from launcher.worker.stack_server import serve_stacks

_registered: list[bool] = []


def dump_stacks_on_signal(reporter: Reporter, environ: Mapping[str, str] = os.environ) -> None:
    if _registered:
        return
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
    _registered.append(True)
    if (port := environ.get(STACKS_PORT, "")).isdigit():
        serve_stacks(reporter.token, int(port))
    reporter.emit(StacksOnSignal(signal=STACKS_SIGNAL.name))
