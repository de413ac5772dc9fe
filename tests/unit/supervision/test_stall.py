"""The stall watchdog's pure policy (``launcher.supervision.stall``), the stack-dump reading and the stall decision."""

from __future__ import annotations

from typing import Any

import pytest

from launcher import api
from launcher.protocol.events import EventKind
from launcher.supervision.rules import Action, Rules
from launcher.supervision.stacks import is_stack_line, suspects
from launcher.supervision.stall import FIRST_STEP_FACTOR, StallClock, StallVerdict, judge, observe
from launcher.supervision.stragglers import StepTime, stragglers

FLOOR = 10.0


def steady(every: float, reports: int, start: float = 0.0) -> StallClock:
    clock = StallClock(start).reports()
    for n in range(reports):
        clock = clock.advanced(start + every * (n + 1))
    return clock


def test_a_program_that_reports_nothing_is_never_judged_stalled() -> None:
    clock = StallClock(0.0)
    assert judge(clock, 10_000.0, FLOOR).verdict is StallVerdict.BLIND


def test_before_the_first_report_the_first_step_allowance_applies() -> None:
    clock = StallClock(0.0).reports()
    assert judge(clock, FIRST_STEP_FACTOR * FLOOR - 1, FLOOR).verdict is StallVerdict.HEALTHY
    assert judge(clock, FIRST_STEP_FACTOR * FLOOR + 1, FLOOR).verdict is StallVerdict.STALLED


def test_fast_steps_stall_after_the_floor_not_before() -> None:
    clock = steady(0.1, 20)
    last = 2.0
    assert judge(clock, last + FLOOR - 0.5, FLOOR).verdict is StallVerdict.HEALTHY
    judgement = judge(clock, last + FLOOR + 0.5, FLOOR)
    assert judgement.verdict is StallVerdict.STALLED and judgement.timeout_seconds == FLOOR


def test_slow_steps_raise_the_timeout_above_the_floor() -> None:
    clock = steady(5.0, 10)  # 10 x the median: 50 s
    assert judge(clock, 50.0 + 45.0, FLOOR).verdict is StallVerdict.HEALTHY
    assert judge(clock, 50.0 + 55.0, FLOOR).verdict is StallVerdict.STALLED


def test_a_long_save_once_seen_is_allowed_again() -> None:
    clock = steady(0.1, 10).advanced(1.0 + 30.0)  # a 30 s save between two reports
    assert judge(clock, 31.0 + 85.0, FLOOR).verdict is StallVerdict.HEALTHY  # 3 x 30 s
    assert judge(clock, 31.0 + 95.0, FLOOR).verdict is StallVerdict.STALLED


def test_the_first_step_is_counted_from_the_last_sign_of_life() -> None:
    clock = StallClock(0.0).reports().alive(100.0)  # a long startup, then the strategy is built
    assert judge(clock, 100.0 + FIRST_STEP_FACTOR * FLOOR - 1, FLOOR).verdict is StallVerdict.HEALTHY
    assert clock.advanced(101.0).alive(200.0).since == 101.0  # once steps come, only reports count


def test_a_slow_first_step_once_seen_raises_the_allowance_of_the_next_attempts() -> None:
    clock = StallClock(0.0).reports().advanced(50.0).started(100.0)  # the first step took 50 s
    assert judge(clock, 100.0 + 149.0, FLOOR).verdict is StallVerdict.HEALTHY
    assert judge(clock, 100.0 + 151.0, FLOOR).verdict is StallVerdict.STALLED


def test_a_restart_gives_the_first_step_allowance_again_and_keeps_the_step_times() -> None:
    clock = steady(0.1, 10).started(100.0)
    assert judge(clock, 100.0 + 2 * FLOOR, FLOOR).verdict is StallVerdict.HEALTHY
    clock = clock.advanced(100.0 + 2 * FLOOR)  # the first report after the restart: no interval recorded
    assert clock.intervals == steady(0.1, 10).intervals
    assert judge(clock, 100.0 + 3 * FLOOR - 1, FLOOR).verdict is StallVerdict.HEALTHY  # the floor again
    assert judge(clock, 100.0 + 3 * FLOOR + 1, FLOOR).verdict is StallVerdict.STALLED


@pytest.mark.parametrize("every", [0.01, 0.5, 3.0, 20.0])
def test_a_steady_job_is_never_stalled_between_its_reports(every: float) -> None:
    clock = steady(every, 30)
    for fraction in (0.5, 1.0, 2.0):
        assert judge(clock, 30 * every + fraction * every, FLOOR).verdict is StallVerdict.HEALTHY


DUMP_IN_OP = """Thread 0x00007f0000000001 (most recent call first):
  File "/app/user.py", line 12 in block
  File "/venv/lib/python3.11/site-packages/tensorflow/python/ops/script_ops.py", line 269 in __call__

Current thread 0x00007f0000000002 (most recent call first):
  File "/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute"""
DUMP_WAITING = """Current thread 0x00007f0000000003 (most recent call first):
  File "/venv/lib/python3.11/site-packages/tensorflow/python/eager/execute.py", line 53 in quick_execute
  <no Python frame>"""


def test_stack_lines_are_told_from_other_output() -> None:
    assert all(is_stack_line(line) for line in DUMP_IN_OP.splitlines() if line)
    assert not is_stack_line("2026-01-01 INFO epoch 1")
    assert not is_stack_line('TFCLUSTER_EVENT {"event": "step"}')


def test_the_task_running_python_inside_an_op_is_suspected() -> None:
    names, why = suspects({"c": DUMP_WAITING, "w0": DUMP_WAITING, "w1": DUMP_IN_OP})
    assert names == ("w1",) and "py_function" in why


def test_a_task_that_wrote_no_stacks_is_suspected_when_the_others_did() -> None:
    assert suspects({"c": DUMP_WAITING, "w0": None, "w1": DUMP_WAITING})[0] == ("w0",)
    assert suspects({"c": None, "w0": None})[0] == ()
    assert suspects({"c": DUMP_WAITING, "w0": DUMP_WAITING})[0] == ()


def rules(roles: dict[str, Any], **stall: Any) -> Rules:
    data = {"name": "job", "roles": roles, **({"stall": stall} if stall else {})}
    return Rules.from_plan(api.plan(api.validate_data(data)))


MWMS = {"chief": {}, "worker": {"replicas": 2}}


def test_a_stall_restarts_the_whole_mwms_group_within_the_budget() -> None:
    decision = rules(MWMS).decide_stall(["job-worker-1"], 0, "no step for 12 s")
    assert decision.action is Action.RESTART and not decision.preemption
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1")
    assert decision.message.startswith("stalled: no step for 12 s") and "restart 1/3" in decision.message
    assert rules(MWMS).decide_stall(["job-worker-1"], 3, "x").action is Action.FAIL


def test_without_a_suspect_every_training_task_restarts() -> None:
    decision = rules({**MWMS, "evaluator": {}}).decide_stall([], 0, "x")
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1")


def test_a_stuck_parameter_server_worker_restarts_alone() -> None:
    decision = rules({"chief": {}, "worker": {"replicas": 2}, "ps": {}}).decide_stall(["job-worker-1"], 0, "x")
    assert decision.restart == ("job-worker-1",)


def test_fail_and_warn_actions() -> None:
    assert rules(MWMS, action="fail").decide_stall(["job-worker-1"], 0, "x").action is Action.FAIL
    warn = rules(MWMS, action="warn").decide_stall(["job-worker-1"], 0, "x")
    assert warn.action is Action.CONTINUE and "warn" in warn.message
    assert rules(MWMS, timeout_seconds=5).policy.stall_floor_seconds == 5


def times(*values: tuple[float | None, float | None]) -> list[StepTime]:
    return [StepTime(step, data) for step, data in values]


def test_the_task_whose_input_is_slow_is_the_straggler_though_every_step_takes_as_long() -> None:
    found = stragglers({"c": times((0.1, 0.002)), "w0": times((0.1, 0.003)), "w1": times((0.1, 0.08))})
    assert [(s.task, s.measure) for s in found] == [("w1", "input_seconds_per_batch")]
    assert found[0].seconds == 0.08 and found[0].median_seconds == 0.003 and found[0].ratio > 20


def test_with_inputs_alike_the_task_whose_compute_is_slow_is_the_straggler() -> None:
    def report(compute: float, peers: float) -> list[StepTime]:
        return [StepTime(0.2, 0.01, compute, peers)]

    found = stragglers({"c": report(0.05, 0.15), "w0": report(0.05, 0.15), "w1": report(0.19, 0.01)})
    assert [(s.task, s.measure, s.seconds, s.median_seconds) for s in found] == [
        ("w1", "compute_seconds_per_batch", 0.19, 0.05)]


def test_without_an_input_probe_the_wall_time_per_step_tells() -> None:
    found = stragglers({"a": times((0.1, None)), "b": times((0.11, None)), "c": times((0.3, None))})
    assert [s.task for s in found] == ["c"]


def test_nobody_is_named_among_equals_or_by_timer_noise_or_with_too_few_tasks() -> None:
    assert stragglers({"a": times((0.1, 0.01)), "b": times((0.1, 0.011)), "c": times((0.1, 0.012))}) == []
    assert stragglers({"a": times((0.001, None)), "b": times((0.001, None)), "c": times((0.004, None))}) == []
    assert stragglers({"a": times((0.1, 0.01)), "b": times((0.1, 0.5))}) == []


def test_a_probes_jitter_that_is_a_small_part_of_the_step_names_nobody_and_the_slow_compute_still_tells() -> None:
    """CI's compose run: worker 0's input probe read 6.3 ms against a median of 1.2 ms, in ~100 ms steps."""
    def report(input_seconds: float, compute: float) -> list[StepTime]:
        return [StepTime(0.1, input_seconds, compute)]

    found = stragglers({"c": report(0.0012, 0.02), "w0": report(0.0063, 0.02), "w1": report(0.0011, 0.07)})
    assert [(s.task, s.measure) for s in found] == [("w1", "compute_seconds_per_batch")]
    assert stragglers({"c": report(0.0012, 0.02), "w0": report(0.0063, 0.02), "w1": report(0.0011, 0.02)}) == []
    # the same 5 ms in 20 ms steps holds the others up by a quarter of a step: named
    found = stragglers({t: [StepTime(0.02, i, 0.01)] for t, i in (("c", 0.0012), ("w0", 0.0063), ("w1", 0.0011))})
    assert [(s.task, s.measure) for s in found] == [("w0", "input_seconds_per_batch")]


def test_the_window_forgets_old_reports() -> None:
    slow_then_fast = times((0.1, 0.5), (0.1, 0.01), (0.1, 0.01), (0.1, 0.01))
    assert stragglers({"a": times((0.1, 0.01)), "b": times((0.1, 0.01)), "c": slow_then_fast}) == []


def test_after_the_lead_finished_its_exit_gets_the_first_step_allowance_not_the_floor() -> None:
    """CI: a chief's exit after ``finished`` took over 15 s with a 10 s floor, and the finished job was restarted."""
    clock = StallClock(since=0.0).reports()
    for now in (1.0, 1.1, 1.2, 1.3):
        clock = observe(clock, EventKind.STEP, now)
    assert judge(clock, 12.0, 10.0).verdict is StallVerdict.STALLED  # silent past the floor while training
    clock = observe(clock, EventKind.FINISHED, 2.0)
    assert judge(clock, 20.0, 10.0).verdict is StallVerdict.HEALTHY  # 18 s into its exit: within 3x the floor
    assert judge(clock, 33.0, 10.0).verdict is StallVerdict.STALLED  # an exit that hangs is still found
