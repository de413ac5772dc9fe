"""Unit tests never read the wall clock implicitly: an event a test builds or parses carries its own ``time``.

An event's ``time`` defaults to the wall clock (``launcher.protocol.events``), so a test that builds one
without ``time=`` expects whatever the clock said, and its result depends on how fast it ran (the fold test
failed so on a loaded host). ``no_implicit_clock`` replaces the clock that default reads: when test code
(anything outside ``launcher/``) leads to the read, it raises ``ImplicitClockRead``; the product's own
events (a worker's reporter, stamped as the product stamps them) still get the real time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import launcher
from helpers.paths import REPO
from launcher.protocol import events

LAUNCHER = Path(launcher.__file__).resolve().parent  # wherever Python imports it from
TESTS = REPO / "tests"
EVENTS = Path(events.__file__).resolve()


class ImplicitClockRead(RuntimeError):
    """A test built or parsed an event without its time (not an AssertionError: pydantic would wrap that)."""


def _asker() -> Path | None:
    """The file of the innermost frame in ``launcher/`` or ``tests/`` that led to the clock read, past
    ``events.py`` itself (its default, ``parse_event``); pydantic's, the stdlib's and pytest's frames are skipped."""
    frame = sys._getframe(3)  # 0: here, 1: _Clock.time, 2: events._now
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path != EVENTS and (path.is_relative_to(LAUNCHER) or path.is_relative_to(TESTS)):
            return path
        frame = frame.f_back
    return None


class _Clock:
    """Stands for the ``time`` module inside ``launcher.protocol.events`` (whose default reads ``time.time()``)."""

    @staticmethod
    def time() -> float:
        asker = _asker()
        if asker is not None and asker.is_relative_to(LAUNCHER):
            return time.time()
        where = asker.relative_to(REPO) if asker is not None and asker.is_relative_to(REPO) else asker
        raise ImplicitClockRead(f"an event without time= ({where}): a unit test gives each event its time "
                                "(the default reads the wall clock, so the result would depend on how fast the test ran)")


@contextmanager
def no_implicit_clock() -> Iterator[None]:
    """While inside: an event's default time raises ``ImplicitClockRead`` when test code asked for it."""
    assert getattr(events, "time", None) is time, "launcher.protocol.events no longer reads time.time(): update this guard"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "time", _Clock)
        yield
