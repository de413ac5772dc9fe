"""``backup_every_steps: auto``: the interval from the save's cost and the job's failures (Young–Daly), and why.

Pure: every time is an argument (``launcher.worker.interval`` imports no TensorFlow until it agrees with peers).
"""

from __future__ import annotations

import math

import pytest
from rich.console import Console

from launcher.cli.watch import status_view
from launcher.plan.targets import BackendKind
from launcher.protocol.events import BackupInterval
from launcher.protocol.job_progress import JobProgress, progress
from launcher.supervision.status import JobStatus, State
from launcher.worker.interval import MAX_STEPS, choose, steps_between, young_daly_steps


def test_young_daly_is_the_square_root_of_twice_the_save_times_the_mtbf_in_steps() -> None:
    # sqrt(2 x 0.8 s x 3600 s) = 75.9 s of training; at 0.5 s a step: 152 steps
    assert young_daly_steps(save_seconds=0.8, step_seconds=0.5, mtbf_seconds=3600) == 152
    # four times the MTBF: twice the interval
    assert young_daly_steps(save_seconds=0.8, step_seconds=0.5, mtbf_seconds=4 * 3600) == 304
    assert young_daly_steps(save_seconds=0.0, step_seconds=0.5, mtbf_seconds=3600) == 1  # free: every step
    assert young_daly_steps(save_seconds=60, step_seconds=0.001, mtbf_seconds=86400) == MAX_STEPS  # bounded
    assert young_daly_steps(save_seconds=0.8, step_seconds=0.0, mtbf_seconds=3600) == MAX_STEPS


def test_a_stated_mtbf_decides_until_the_run_fails_and_the_reason_says_so() -> None:
    chosen = choose(save_seconds=0.8, step_seconds=0.5, failures=0, observed_seconds=600, stated_mtbf=3600)
    assert (chosen.steps, chosen.mtbf_seconds) == (152, 3600)
    assert chosen.reason == "save 0.8 s, MTBF 1 h (stated)"


def test_observed_failures_decide_over_a_stated_mtbf_and_the_interval_grows_as_the_run_goes_on_without_more() -> None:
    early = choose(save_seconds=0.8, step_seconds=0.5, failures=2, observed_seconds=2400, stated_mtbf=86400)
    assert early.mtbf_seconds == 1200 and early.steps == round(math.sqrt(2 * 0.8 * 1200) / 0.5) == 88
    assert early.reason == "save 0.8 s, MTBF 20 min (2 failures in 40 min)"
    later = choose(save_seconds=0.8, step_seconds=0.5, failures=2, observed_seconds=4 * 2400, stated_mtbf=None)
    assert later.steps == 175 and later.reason == "save 0.8 s, MTBF 1.3 h (2 failures in 2.7 h)"
    one = choose(save_seconds=2.0, step_seconds=0.1, failures=1, observed_seconds=90, stated_mtbf=None)
    assert one.reason == "save 2 s, MTBF 90 s (1 failure in 90 s)" and one.steps == 190  # sqrt(360) / 0.1


def test_with_no_failure_and_no_stated_mtbf_backups_keep_to_their_share_and_the_reason_says_so() -> None:
    chosen = choose(save_seconds=0.01, step_seconds=0.1, failures=0, observed_seconds=600, stated_mtbf=None)
    assert chosen.steps == steps_between(0.01, 0.1) == 5 and chosen.mtbf_seconds is None
    assert chosen.reason == "save 0.01 s, no failure yet and no restart.expected_mtbf: backups hold training up at most 2%"


@pytest.mark.parametrize("failures", [0, 1, 5])
def test_the_interval_is_always_within_its_bounds(failures: int) -> None:
    for save, step in [(0.0, 1.0), (100.0, 1e-6), (1e-6, 100.0)]:
        assert 1 <= choose(save, step, failures, 1e6, 1e9).steps <= MAX_STEPS


def test_the_decision_and_the_status_line_carry_the_reason() -> None:
    decided = BackupInterval(steps=152, save_seconds=0.8, step_seconds=0.5, mtbf_seconds=3600,
                             reason="save 0.8 s, MTBF 1 h (stated)", time=5.0)
    folded = progress(JobProgress(epochs=3, total_steps=900, step=300), decided)
    assert (folded.backup_every_steps, folded.backup_reason) == (152, "save 0.8 s, MTBF 1 h (stated)")
    console = Console(width=200, record=True)
    console.print(status_view(JobStatus("demo", BackendKind.LOCAL, State.RUNNING, progress=folded)))
    assert "backup every 152 steps: save 0.8 s, MTBF 1 h (stated)" in console.export_text()
