"""How fast the supervisor polls, lingers, retries and samples stacks: one typed settings object.

Contract: ``Tuning`` groups the ``Supervisor``'s timing knobs, each defaulting to what the supervisor process
uses; tests pass shorter times, a fake ``clock`` and ``pause``. Frozen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from launcher.supervision.stack_evidence import GAP_SECONDS

#: Seconds between two poll rounds (``Tuning.poll_seconds``'s default).
POLL_SECONDS = 0.5
#: Poll rounds in a row that may fail on a runtime fault before the job is failed.
FAULT_RETRIES = 5
#: Seconds between such rounds.
FAULT_PAUSE_SECONDS = 2.0


@dataclass(frozen=True)
class Tuning:
    """``poll_seconds`` between poll rounds; ``linger_seconds`` the others get to exit by themselves after success
    (None: the plan's ``policy.linger_seconds``); ``fault_retries`` rounds in a row may fail on a runtime fault,
    ``fault_pause`` seconds apart; ``stack_gap`` seconds between a suspected stall's two stack samples; ``clock``
    what the stall watchdog's times are read from; ``pause(seconds)`` waits between poll rounds and may end early
    (the harness ends it on any signal, so a task's exit is seen at once); None: it waits for ``cancel``."""

    poll_seconds: float = POLL_SECONDS
    linger_seconds: float | None = None
    fault_retries: int = FAULT_RETRIES
    fault_pause: float = FAULT_PAUSE_SECONDS
    stack_gap: float = GAP_SECONDS
    clock: Callable[[], float] = time.monotonic
    pause: Callable[[float], None] | None = None
