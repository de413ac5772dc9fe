"""The backoff policy (``launcher.supervision.backoff``): the one pause rule of the watches, the poll rounds and the
status writes."""

from __future__ import annotations

from launcher.supervision.backoff import CAP_SECONDS, Backoff, pause


def test_the_pause_doubles_up_to_its_cap_with_jitter_and_honours_retry_after_within_the_cap() -> None:
    assert pause(1, 1.0, CAP_SECONDS, jitter=lambda: 1.0) == 1.0
    assert pause(2, 1.0, CAP_SECONDS, jitter=lambda: 1.0) == 2.0
    assert pause(50, 1.0, CAP_SECONDS, jitter=lambda: 1.0) == CAP_SECONDS
    assert pause(50, 1.0, CAP_SECONDS, jitter=lambda: 0.0) == CAP_SECONDS / 2
    assert pause(1, 1.0, CAP_SECONDS, retry_after=7.0, jitter=lambda: 0.0) == 7.0
    assert pause(1, 1.0, CAP_SECONDS, retry_after=3600.0) == CAP_SECONDS  # a server's hour: not a frozen supervisor


def test_a_success_brings_the_first_pause_back() -> None:
    backoff = Backoff(0.5, jitter=lambda: 1.0)
    assert [backoff.failed() for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]
    backoff.ok()
    assert backoff.failed() == 0.5

