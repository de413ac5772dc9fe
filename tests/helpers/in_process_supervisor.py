"""Running ``harness.run_supervisor`` inside the test process, as the tests of its signal handling do.

``handlers_restored(signals)`` puts back what ``run_supervisor`` changes in this process (its handlers of
``signals`` and its wakeup fd); ``run_then_signal(state, host, signum)`` runs the supervisor and sends ``signum``
to this process once it has started every task (``state.started``), then returns its exit code. The signal is sent
even if that never happens, so a broken test ends instead of supervising for ever.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from helpers.polling import wait_for_condition
from launcher.supervision import harness

#: The longest a test waits for its supervisor to start its tasks, or to end after the signal.
PATIENCE = 60


@contextmanager
def handlers_restored(signals: Iterable[signal.Signals]) -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in signals}
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def run_then_signal(state: harness.StateDir, host: harness.Host, signum: signal.Signals) -> int:
    def send() -> None:
        try:
            wait_for_condition(state.started.exists, timeout=PATIENCE)
        finally:  # never a supervisor left running for ever: it got its handlers before it started a task
            os.kill(os.getpid(), signum)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    code = harness.run_supervisor(state, host)
    sender.join(timeout=PATIENCE)
    return code
