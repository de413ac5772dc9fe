"""One formatter for durations a person reads (``launcher.protocol.durations``), used by the worker's backup
reason, the status line's goodput and the report page."""

from __future__ import annotations

import pytest

from launcher.protocol.durations import for_people
from launcher.supervision.goodput import Goodput, LostSeconds


@pytest.mark.parametrize(("seconds", "shown"), [
    (0.8, "0.8 s"), (2.0, "2 s"), (4.25, "4.2 s"), (42.4, "42 s"), (119, "119 s"), (412.3, "7 min"),
    (2400, "40 min"), (3600, "1 h"), (4800, "1.3 h"), (9600, "2.7 h"), (3 * 86400, "3 d"),
])
def test_one_or_two_figures_and_a_unit(seconds: float, shown: str) -> None:
    assert for_people(seconds) == shown


def test_the_goodput_line_shows_its_durations_through_it() -> None:
    goodput = Goodput(wall_seconds=412.3, productive_seconds=351.0, fraction=0.851,
                      lost_seconds=LostSeconds(start_up=21.4, restarts=17.9, recomputation=9.6, backups=6.2,
                                               input_wait=4.1, stalls=0.0, evaluation=2.1))
    assert goodput.line() == "goodput 85% of 7 min; most lost to start up: 21 s"
