"""Errors a task raises, each mapped to its exit code (``launcher.protocol.exitcodes``) by ``launcher.worker.main``."""

from __future__ import annotations


class ConfigError(Exception):
    """Invalid configuration of the task; maps to ``ExitCode.CONFIG``."""


class PeerUnavailable(Exception):
    """A peer could not be reached; maps to ``ExitCode.PEER_UNAVAILABLE``."""


class TerminationNotice(Exception):
    """The task got a termination notice (and saved, if it could); maps to ``ExitCode.PREEMPTED`` and the ``preempted`` event.

    ``step``: the global step every training task saved at, None when this task saved nothing.
    """

    def __init__(self, step: int | None):
        super().__init__(f"termination notice; saved at step {step}" if step is not None else "termination notice")
        self.step = step
