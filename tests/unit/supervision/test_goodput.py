"""Goodput accounting (launcher.supervision.goodput) over explicit event sequences: every time is given."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.goodput_record import Disrupted, goodput_of
from launcher.protocol import events
from launcher.supervision.goodput import Disruption, Goodput, Ledger

LEAD = "chief-0"


def step(at: float, number: int) -> events.Step:
    return events.Step(task=LEAD, time=at, step=number)


def parts_add_up(goodput: Goodput) -> None:
    total = goodput.productive_seconds + sum(goodput.lost_seconds.model_dump().values())
    assert total == pytest.approx(goodput.wall_seconds, rel=0.02, abs=0.01)


def test_a_clean_run_loses_only_its_start_up():
    record = [step(10.0 + i, 10 * i) for i in range(1, 11)]  # steps 10..100, a second per 10 steps
    goodput = goodput_of(0.0, record, LEAD, now=21.0)
    assert goodput.wall_seconds == 21.0
    assert goodput.lost_seconds.start_up == 11.0
    assert goodput.productive_seconds == 10.0  # 9 s of steps and the second after the last one
    assert goodput.fraction == pytest.approx(10 / 21, abs=0.001)
    assert goodput.recomputed_steps == 0
    parts_add_up(goodput)


def test_a_failure_and_a_restore_recompute_the_steps_since_the_backup():
    record: list[events.Event | Disrupted] = [step(10.0 + i, 10 * i) for i in range(1, 6)]  # up to step 50 at 15 s
    record += [Disrupted(kind=Disruption.FAILURE, time=15.5),
               events.Restored(task=LEAD, time=20.0, epoch=0, step=20),  # the backup was at step 20
               step(21.0, 30), step(22.0, 40), step(23.0, 50), step(24.0, 60)]
    goodput = goodput_of(0.0, record, LEAD, now=24.0)
    lost = goodput.lost_seconds
    assert goodput.recomputed_steps == 30  # steps 21..50 again
    # the half second after step 50 lost with the failure, then steps 21..30 (1 s) inside the restart window and
    # 31..50 (2 s) after it
    assert lost.recomputation == pytest.approx(0.5 + 1.0 + 2.0)
    assert lost.restarts == pytest.approx(21.0 - 15.5 - 1.0)
    assert lost.start_up == 11.0
    assert goodput.productive_seconds == pytest.approx(4.0 + 1.0)
    parts_add_up(goodput)


def test_a_preemption_costs_the_restart_and_nothing_done_again():
    record: list[events.Event | Disrupted] = [step(10.0, 10), step(11.0, 20),
                                              events.Preempted(task=LEAD, time=11.5, step=20),
                                              Disrupted(kind=Disruption.PREEMPTION, time=12.0),
                                              events.Restored(task=LEAD, time=15.0, epoch=0, step=20),
                                              step(16.0, 30), step(17.0, 40)]
    goodput = goodput_of(0.0, record, LEAD, now=17.0)
    assert goodput.recomputed_steps == 0
    assert goodput.lost_seconds.recomputation == 0.0
    assert goodput.lost_seconds.restarts == pytest.approx(16.0 - 11.0)
    assert goodput.productive_seconds == pytest.approx(2.0)
    parts_add_up(goodput)


def test_a_backup_holding_the_steps_is_lost_to_backups_at_its_measured_cost():
    record: list[events.Event | Disrupted] = [
        events.BackupInterval(task=LEAD, time=1.0, steps=20, save_seconds=1.5),
        step(10.0, 10), step(11.0, 20), step(12.0, 30),  # a second per 10 steps
        step(15.0, 40),  # over the backup at step 40: 2 s more than the steady second
    ]
    goodput = goodput_of(0.0, record, LEAD, now=15.0)
    assert goodput.lost_seconds.backups == pytest.approx(1.5)  # at most the measured cost
    assert goodput.lost_seconds.slow_steps == pytest.approx(0.5)  # the rest beyond the steady second
    assert goodput.productive_seconds == pytest.approx(5.0 - 1.5 - 0.5)
    parts_add_up(goodput)


def test_input_wait_is_the_tasks_measured_share_of_the_epochs_training():
    record = [step(10.0, 10), step(12.0, 20), step(14.0, 30),
              events.EpochEnd(task=LEAD, time=14.0, epoch=0, step=30, input_wait_fraction=0.25)]
    goodput = goodput_of(0.0, record, LEAD, now=14.0)
    assert goodput.lost_seconds.input_wait == pytest.approx(1.0)
    assert goodput.productive_seconds == pytest.approx(3.0)
    parts_add_up(goodput)


def test_a_stall_is_lost_from_the_last_step_until_the_verdict_and_the_restart_after_it():
    record: list[events.Event | Disrupted] = [step(10.0, 10), step(11.0, 20),
                                              Disrupted(kind=Disruption.STALL, time=71.0),
                                              Disrupted(kind=Disruption.FAILURE, time=71.0),  # its restart
                                              events.Restored(task=LEAD, time=80.0, epoch=0, step=20),
                                              step(81.0, 30)]
    goodput = goodput_of(0.0, record, LEAD, now=81.0)
    assert goodput.lost_seconds.stalls == pytest.approx(60.0)
    assert goodput.lost_seconds.restarts == pytest.approx(10.0)
    parts_add_up(goodput)


def test_validation_at_an_epochs_end_is_lost_to_evaluation():
    record = [events.BackupInterval(task=LEAD, time=1.0, steps=100), step(10.0, 10), step(11.0, 20),
              events.EpochEnd(task=LEAD, time=11.0, epoch=0, step=20, metrics={"loss": 1.0, "val_loss": 1.1}),
              step(14.0, 30)]
    goodput = goodput_of(0.0, record, LEAD, now=14.0)
    assert goodput.lost_seconds.evaluation == pytest.approx(2.0)
    assert goodput.productive_seconds == pytest.approx(2.0)
    parts_add_up(goodput)


def test_a_step_of_the_disrupted_run_read_late_counts_as_reached_not_as_the_recovery():
    record: list[events.Event | Disrupted] = [step(10.0, 10), Disrupted(kind=Disruption.FAILURE, time=12.0),
                                              step(11.0, 20),  # written before the failure, read after it
                                              events.Restored(task=LEAD, time=15.0, epoch=0, step=0),
                                              step(16.0, 10), step(17.0, 20), step(18.0, 30)]
    goodput = goodput_of(0.0, record, LEAD, now=18.0)
    assert goodput.recomputed_steps == 20


def test_productive_is_the_fresh_steps_at_the_steady_pace_and_slower_steps_are_named():
    """A step slower than the median pace is slow steps; a faster one later gives it back: productive is the steps
    trained once at the pace (what an outside account prices them at: bench/bench_goodput.py)."""
    record = [step(10.0, 10), step(11.0, 20), step(12.0, 30), step(13.0, 40),
              step(16.0, 50),  # 2 s slower than the steady second
              step(16.5, 60),  # half a second faster: gives half a second back
              step(17.5, 70)]
    goodput = goodput_of(0.0, record, LEAD, now=17.5)
    assert goodput.lost_seconds.slow_steps == pytest.approx(1.5)
    assert goodput.productive_seconds == pytest.approx(6.0)  # 60 steps at 0.1 s
    parts_add_up(goodput)


def test_steps_done_again_are_priced_at_the_pace_and_their_slowness_is_slow_steps():
    record: list[events.Event | Disrupted] = [step(10.0 + i, 10 * i) for i in range(1, 6)]  # step 50 at 15 s
    record += [Disrupted(kind=Disruption.FAILURE, time=15.0),
               events.Restored(task=LEAD, time=20.0, epoch=0, step=30),
               step(21.0, 40),  # the first step after the restore: 1 s of recomputation, the rest restarts
               step(24.0, 50),  # 10 steps again in 3 s: 1 s at the pace, 2 s slow (a new process warming up)
               step(25.0, 60)]
    goodput = goodput_of(0.0, record, LEAD, now=25.0)
    assert goodput.recomputed_steps == 20
    assert goodput.lost_seconds.recomputation == pytest.approx(2.0)
    assert goodput.lost_seconds.slow_steps == pytest.approx(2.0)
    assert goodput.lost_seconds.restarts == pytest.approx(5.0)
    parts_add_up(goodput)


def test_after_the_lead_finished_the_time_is_finishing_not_productive():
    record = [step(10.0, 10), step(11.0, 20), events.Finished(task=LEAD, time=14.0)]
    goodput = goodput_of(0.0, record, LEAD, now=16.0)
    assert goodput.lost_seconds.finishing == pytest.approx(5.0)  # the last step until the job's end
    assert goodput.productive_seconds == pytest.approx(1.0)
    parts_add_up(goodput)


def test_other_tasks_events_do_not_move_the_lead_s_account():
    ledger = Ledger.launched(0.0).event(events.Step(task="worker-1", time=5.0, step=10), from_lead=False)
    assert ledger.goodput(now=6.0).lost_seconds.start_up == 6.0


def test_the_json_shape_is_the_interface():
    document = goodput_of(0.0, [step(1.0, 10)], LEAD, now=2.0).model_dump(mode="json")
    assert set(document) == {"wall_seconds", "productive_seconds", "fraction", "lost_seconds", "recomputed_steps"}
    assert set(document["lost_seconds"]) == {"start_up", "restarts", "recomputation", "backups", "input_wait",
                                             "stalls", "evaluation", "slow_steps", "finishing"}


_GAPS = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)
_ITEMS = st.one_of(
    st.tuples(st.just("step"), _GAPS, st.integers(min_value=-5, max_value=40)),
    st.tuples(st.just("restored"), _GAPS, st.integers(min_value=0, max_value=200)),
    st.tuples(st.sampled_from(["failure", "preemption", "stall"]), _GAPS, st.just(0)),
    st.tuples(st.just("epoch"), _GAPS, st.floats(min_value=0.0, max_value=1.0)),
    st.tuples(st.just("backup_interval"), _GAPS, st.integers(min_value=1, max_value=50)),
    st.tuples(st.just("step_time"), _GAPS, st.floats(min_value=0.001, max_value=10.0)),
    st.tuples(st.just("finished"), _GAPS, st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEMS, max_size=40), _GAPS)
def test_the_parts_and_productive_add_up_to_the_wall_time_over_any_sequence(items, tail):
    at, number, record = 0.0, 0, []
    for kind, gap, value in items:
        at += gap
        if kind == "step":
            number = max(0, number + int(value))
            record.append(step(at, number))
        elif kind == "restored":
            record.append(events.Restored(task=LEAD, time=at, epoch=0, step=int(value)))
        elif kind == "epoch":
            record.append(events.EpochEnd(task=LEAD, time=at, epoch=0, input_wait_fraction=value,
                                          metrics={"val_loss": 1.0}))
        elif kind == "backup_interval":
            record.append(events.BackupInterval(task=LEAD, time=at, steps=int(value), save_seconds=gap / 10))
        elif kind == "step_time":
            record.append(events.StepTime(task=LEAD, time=at, epoch=0, seconds_per_step=value))
        elif kind == "finished":
            record.append(events.Finished(task=LEAD, time=at))
        else:
            record.append(Disrupted(kind=Disruption(kind), time=at))
    goodput = goodput_of(0.0, record, LEAD, now=at + tail)
    assert goodput.wall_seconds == pytest.approx(at + tail, abs=0.001)
    assert min(goodput.lost_seconds.model_dump().values()) >= 0
    assert 0 <= goodput.fraction <= 1
    parts_add_up(goodput)


def test_an_account_resumed_from_a_published_goodput_carries_its_parts_on():
    before = goodput_of(0.0, [step(10.0, 10), step(11.0, 20)], LEAD, now=12.0)
    ledger = Ledger.resumed(before, launched_at=0.0, step=20).event(step(14.0, 30), from_lead=True)
    after = ledger.goodput(now=14.0)
    assert after.wall_seconds == 14.0 and after.lost_seconds.start_up == 10.0
    assert after.productive_seconds == pytest.approx(4.0)
    parts_add_up(after)
