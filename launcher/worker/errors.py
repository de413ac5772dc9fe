"""Errors a task raises, each mapped to its exit code (``launcher.protocol.exitcodes``) by ``launcher.worker.main``."""

from __future__ import annotations


class ConfigError(Exception):
    """Invalid configuration of the task; maps to ``ExitCode.CONFIG``."""


class PeerUnavailable(Exception):
    """A peer could not be reached; maps to ``ExitCode.PEER_UNAVAILABLE``."""
