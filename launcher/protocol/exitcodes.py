"""Exit codes of a task, chosen for the supervisor's restart policies: what the entrypoint exits with
and what every backend reports (a task killed by signal N exits ``SIGNAL_EXIT_BASE`` + N, shell-style).

Codes: 0 success; 1 the training program failed (not retried by ``exit-code``); 2 bad configuration
(never worth retrying); 175 a peer is unreachable or died (retried by ``exit-code`` and ``on-failure``);
143 preempted: every training task saved on a termination notice (not a failure: bounded by
``restart.max_preemptions``).

Contract: every non-zero exit of the entrypoint is preceded by a ``failed`` event carrying the reason
and the code, except ``PREEMPTED``, preceded by a ``preempted`` event. Why these values:
docs/architecture.md (Decisions).
"""

from __future__ import annotations

from enum import IntEnum

#: Exit codes at or above this mean "killed by a signal" (OOM, preemption, kill -9).
SIGNAL_EXIT_BASE = 128
#: What backends report for a run whose exit code nobody can read any more (a container removed
#: outside tfcluster, a local task killed together with the shell that records its code, a task an
#: adopting supervisor finds no trace of): as if SIGKILLed, so the restart policy decides.
LOST_EXIT = SIGNAL_EXIT_BASE + 9


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    CONFIG = 2
    PEER_UNAVAILABLE = 175
    PREEMPTED = 143


def preempted(code: int) -> bool:
    """True for the exit of a task that got a termination notice (and saved, if it trained)."""
    return code == ExitCode.PREEMPTED


def killed_by_signal(code: int) -> bool:
    """True for an exit a signal caused (128+N), as shells and every backend report it."""
    return code >= SIGNAL_EXIT_BASE
