"""``bench/bench_goodput.py``'s outside account of a run, from the chief's events, the kills and ``up``'s two ends."""

from __future__ import annotations

import sys

import pytest

from helpers.paths import REPO
from launcher.protocol.events import Restored, Step, WarmStart

sys.path.insert(0, str(REPO / "bench"))

from bench_goodput import measured  # noqa: E402


def step(n: int, at: float) -> Step:
    return Step(task="c-chief-0", step=n, time=at)


def restored(n: int, at: float) -> Restored:
    return Restored(task="c-chief-0", epoch=0, step=n, time=at)


#: Up at 100; steps every 10 at 1 s each from 120; a kill at 134.5 after step 40 (the killed run reports step 50
#: late, at 135); restored at 150 to step 30, the first step after it at 152; a second kill at 200.5 after step 80,
#: restored to 70 at 210, its first step at 211.5; the last step, 100, at 225; up exits at 230.
CHIEF = [step(10, 120.0), step(20, 130.0), step(30, 131.0), step(40, 132.0), step(50, 135.0),
         WarmStart(task="c-chief-0", import_seconds=1.0, waited_seconds=9.0, time=149.0), restored(30, 150.0),
         step(40, 152.0), step(50, 153.0), step(60, 154.0), step(70, 155.0), step(80, 156.0),
         restored(70, 210.0), step(80, 211.5), step(90, 212.5), step(100, 225.0)]


def test_the_outside_account_of_two_kills() -> None:
    outside = measured(100.0, 230.0, CHIEF, kills=[134.5, 200.5])
    assert outside.wall_seconds == 230.0 - 100.0
    assert outside.start_up_seconds == 120.0 - 100.0
    assert outside.recomputed_steps == (50 - 30) + (80 - 70)  # the step reported late counts: the run reached it
    assert outside.kill_to_step_seconds == (152.0 - 134.5, 211.5 - 200.5)
    assert outside.step_seconds == pytest.approx(0.1)  # the median pace between reports of one run
    assert outside.fresh_steps == 100
    assert outside.failure_seconds == pytest.approx(17.5 + 11.0 + 30 * 0.1)
    assert outside.productive_seconds == pytest.approx(10.0)
    assert outside.fraction == pytest.approx(10.0 / 130.0)
    assert outside.tail_seconds == 230.0 - 225.0


def test_a_restore_without_a_step_before_it_is_no_step_done_again() -> None:
    chief = [restored(0, 120.0), step(10, 121.0), step(20, 122.0)]
    assert measured(100.0, 130.0, chief, kills=[]).recomputed_steps == 0


def test_a_kill_with_no_step_after_a_restore_is_an_error_not_a_number() -> None:
    with pytest.raises(ValueError, match="no step after a restore"):
        measured(100.0, 230.0, CHIEF[:5], kills=[134.5])
