"""The stall watchdog's pure policy: time (``launcher.supervision.stall``), what two stack samples say
(``launcher.supervision.stack_evidence``), the stack-dump reading and the stall decision. Every time is given."""

from __future__ import annotations

from typing import Any

import pytest

from launcher import api
from launcher.protocol.events import EventKind
from launcher.supervision.rules import Action, Rules, Stalled, Used
from launcher.supervision.stack_dumps import is_stack_line
from launcher.supervision.stack_evidence import StackReading, StackVerdict, TaskStacks, read, thread_stacks, two_samples
from launcher.supervision.stall import (
    FIRST_STEP_FACTOR,
    LOOK_SECONDS,
    Finding,
    StallClock,
    StallEvidence,
    StallVerdict,
    after_event,
    conclude,
    describe,
    judge,
)
from launcher.supervision.stragglers import StepBreakdown, stragglers

FLOOR = 10.0


def steady(every: float, reports: int, start: float = 0.0) -> StallClock:
    clock = StallClock(start).reports()
    for n in range(reports):
        clock = clock.advanced(start + every * (n + 1))
    return clock


UNREADABLE = StackReading(StackVerdict.UNREADABLE, (), "no training task's stacks could be read")


def on_time(clock: StallClock, now: float, floor: float = FLOOR) -> StallVerdict:
    """The verdict at ``now`` where no stacks can be read: time alone decides."""
    judgement = judge(clock, now, floor)
    return conclude(judgement, UNREADABLE).verdict if judgement.verdict is StallVerdict.SUSPECTED else judgement.verdict


def test_a_program_that_reports_nothing_is_never_judged_stalled() -> None:
    clock = StallClock(0.0)
    assert on_time(clock, 10_000.0) is StallVerdict.BLIND


def test_before_the_first_report_the_first_step_allowance_applies() -> None:
    clock = StallClock(0.0).reports()
    assert on_time(clock, FIRST_STEP_FACTOR * FLOOR - 1) is StallVerdict.HEALTHY
    assert on_time(clock, FIRST_STEP_FACTOR * FLOOR + 1) is StallVerdict.STALLED


def test_fast_steps_stall_after_the_floor_not_before() -> None:
    clock = steady(0.1, 20)
    last = 2.0
    assert on_time(clock, last + FLOOR - 0.5) is StallVerdict.HEALTHY
    judgement = judge(clock, last + FLOOR + 0.5, FLOOR)
    assert judgement.verdict is StallVerdict.SUSPECTED and judgement.timeout_seconds == FLOOR
    assert conclude(judgement, UNREADABLE).verdict is StallVerdict.STALLED


def test_slow_steps_raise_the_timeout_above_the_floor() -> None:
    clock = steady(5.0, 10)  # 10 x the median: 50 s
    assert on_time(clock, 50.0 + 45.0) is StallVerdict.HEALTHY
    assert on_time(clock, 50.0 + 55.0) is StallVerdict.STALLED


def test_a_long_save_once_seen_is_allowed_again() -> None:
    clock = steady(0.1, 10).advanced(1.0 + 30.0)  # a 30 s save between two reports
    assert on_time(clock, 31.0 + 85.0) is StallVerdict.HEALTHY  # 3 x 30 s
    assert on_time(clock, 31.0 + 95.0) is StallVerdict.STALLED


def test_the_first_step_is_counted_from_the_last_sign_of_life() -> None:
    clock = StallClock(0.0).reports().alive(100.0)  # a long startup, then the strategy is built
    assert on_time(clock, 100.0 + FIRST_STEP_FACTOR * FLOOR - 1) is StallVerdict.HEALTHY
    assert clock.advanced(101.0).alive(200.0).since == 101.0  # once steps come, only reports count


def test_a_slow_first_step_once_seen_raises_the_allowance_of_the_next_attempts() -> None:
    clock = StallClock(0.0).reports().advanced(50.0).started(100.0)  # the first step took 50 s
    assert on_time(clock, 100.0 + 149.0) is StallVerdict.HEALTHY
    assert on_time(clock, 100.0 + 151.0) is StallVerdict.STALLED


def test_a_restart_gives_the_first_step_allowance_again_and_keeps_the_step_times() -> None:
    clock = steady(0.1, 10).started(100.0)
    assert on_time(clock, 100.0 + 2 * FLOOR) is StallVerdict.HEALTHY
    clock = clock.advanced(100.0 + 2 * FLOOR)  # the first report after the restart: no interval recorded
    assert clock.intervals == steady(0.1, 10).intervals
    assert on_time(clock, 100.0 + 3 * FLOOR - 1) is StallVerdict.HEALTHY  # the floor again
    assert on_time(clock, 100.0 + 3 * FLOOR + 1) is StallVerdict.STALLED


@pytest.mark.parametrize("every", [0.01, 0.5, 3.0, 20.0])
def test_a_steady_job_is_never_stalled_between_its_reports(every: float) -> None:
    clock = steady(every, 30)
    for fraction in (0.5, 1.0, 2.0):
        assert on_time(clock, 30 * every + fraction * every) is StallVerdict.HEALTHY


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


def still(dump: str | None, asked: bool = True, trains: bool = True) -> TaskStacks:
    """A task whose two samples are the same."""
    return TaskStacks(dump, dump, asked, trains)


def test_the_task_running_python_inside_an_op_in_the_same_frames_twice_is_stuck() -> None:
    reading = read({"c": still(DUMP_WAITING), "w0": still(DUMP_WAITING), "w1": still(DUMP_IN_OP)})
    assert (reading.verdict, reading.suspects) == (StackVerdict.STUCK, ("w1",)) and "py_function" in reading.why


def test_a_python_op_holds_the_others_only_when_they_wait_elsewhere() -> None:
    """Every task in its own input pipeline's Python (each one's slow first batch): nobody stands out; a job of
    one task has no peers to wait, and its op holds its step."""
    everyone = read({"c": still(DUMP_IN_OP), "w0": still(DUMP_IN_OP)})
    assert (everyone.verdict, everyone.suspects) == (StackVerdict.UNCLEAR, ())
    alone = read({"w0": still(DUMP_IN_OP), "e": still(DUMP_WAITING, trains=False)})
    assert (alone.verdict, alone.suspects) == (StackVerdict.STUCK, ("w0",))


def test_a_task_that_answered_neither_request_is_stuck_when_the_others_stood_still() -> None:
    """A ParameterServer worker stopped (SIGSTOP): it cannot answer; the coordinator and the others wait."""
    reading = read({"c": still(DUMP_WAITING), "w0": still(None), "w1": still(DUMP_WAITING)})
    assert (reading.verdict, reading.suspects) == (StackVerdict.STUCK, ("w0",))
    answered_once = read({"c": still(DUMP_WAITING), "w0": TaskStacks(DUMP_WAITING, None, asked=True)})
    assert (answered_once.verdict, answered_once.suspects) == (StackVerdict.UNCLEAR, ("w0",))


def test_any_training_task_whose_stacks_moved_clears_the_job_even_with_a_thread_in_an_op() -> None:
    """A py_function that works (its frames move) or a peer saving: working, not stuck."""
    moving = TaskStacks(DUMP_WAITING, DUMP_WAITING.replace("line 53", "line 60"))
    reading = read({"c": moving, "w0": still(DUMP_WAITING), "w1": still(DUMP_IN_OP)})
    assert (reading.verdict, reading.suspects) == (StackVerdict.MOVED, ()) and "c moved" in reading.why


def test_an_evaluators_moving_stacks_say_nothing_of_training() -> None:
    evaluating = TaskStacks(DUMP_WAITING, DUMP_WAITING.replace("line 53", "line 60"), trains=False)
    reading = read({"c": still(DUMP_WAITING), "w1": still(DUMP_IN_OP), "e": evaluating})
    assert (reading.verdict, reading.suspects) == (StackVerdict.STUCK, ("w1",))


def test_unchanged_stacks_where_no_task_stands_out_or_none_could_be_read_leave_it_to_time() -> None:
    reading = read({"c": still(DUMP_WAITING), "w0": still(DUMP_WAITING), "w1": still(None, asked=False)})
    assert (reading.verdict, reading.suspects) == (StackVerdict.UNCLEAR, ("w1",))  # read from outside: none
    assert read({"c": still(None), "w0": still(None)}).verdict is StackVerdict.UNREADABLE  # none answered
    assert read({"c": still(None, asked=False)}).verdict is StackVerdict.UNREADABLE
    assert read({"e": still(DUMP_IN_OP, trains=False)}).verdict is StackVerdict.UNREADABLE


PYSPY = """Process 7: python -m launcher.worker
Python v3.11.2 (/opt/venv/bin/python)

Thread 7 (active): "MainThread"
    _call_flat (/opt/venv/lib/python3.11/site-packages/tensorflow/python/eager/polymorphic_function/concrete_function.py:1324)
    train (/opt/venv/lib/python3.11/site-packages/launcher/worker/train.py:64)
Thread 41 (idle): "Thread-2"
    gate (/workspace/stuck_input.py:46)"""


def test_samples_are_compared_by_each_threads_frames_in_either_format() -> None:
    # faulthandler: which thread is current changes with the thread the signal found running
    swapped = DUMP_IN_OP.replace("Current thread", "Thread").replace("Thread 0x00007f0000000002", "Current thread 0x00007f0000000002")
    assert thread_stacks(swapped) == thread_stacks(DUMP_IN_OP)
    assert thread_stacks(DUMP_IN_OP.replace("line 12", "line 13")) != thread_stacks(DUMP_IN_OP)
    # py-spy: a thread's idle/active mark and the threads' order change; its frames do not
    head, threads = PYSPY.replace("(active)", "(idle)").split("\n\n")
    main_thread, other = threads.split("\nThread 41")
    assert thread_stacks(f"{head}\n\nThread 41{other}\n{main_thread}") == thread_stacks(PYSPY)
    assert thread_stacks(PYSPY.replace("train.py:64", "train.py:65")) != thread_stacks(PYSPY)
    assert len(thread_stacks(PYSPY)) == 2 and len(thread_stacks(DUMP_IN_OP)) == 2


def test_two_samples_are_taken_a_gap_apart_and_not_again_when_the_first_had_none() -> None:
    rounds = iter([{"c": "a", "w": None}, {"c": "b", "w": None}])
    waited: list[float] = []
    samples = two_samples(lambda: next(rounds), lambda s: waited.append(s) or True, {"c": True}, {}, 5.0)
    assert waited == [5.0] and samples == {"c": TaskStacks("a", "b", True, True), "w": TaskStacks(None, None)}
    nothing = two_samples(lambda: {"c": None}, lambda s: waited.append(s) or True, {}, {}, 5.0)
    assert waited == [5.0] and nothing == {"c": TaskStacks(None, None)}  # no gap, no second round
    assert two_samples(lambda: {"c": "a"}, lambda s: False, {}, {}, 5.0) is None  # the job advanced meanwhile


def test_with_the_default_floor_a_fast_job_is_looked_at_after_half_a_minute_and_found_within_a_minute() -> None:
    """Issue 36's job: ~25 ms steps, reported every 10; worker 1 blocks in its input pipeline at 40 s."""
    floor = 600.0
    clock = steady(0.25, 160)  # reports until 40 s
    assert judge(clock, 40.0 + LOOK_SECONDS, floor).verdict is StallVerdict.HEALTHY
    judgement = judge(clock, 40.0 + LOOK_SECONDS + 1, floor)
    assert judgement.verdict is StallVerdict.SUSPECTED and judgement.timeout_seconds == floor
    stuck = read({"c": still(DUMP_WAITING), "w0": still(DUMP_WAITING), "w1": still(DUMP_IN_OP)})
    assert conclude(judgement, stuck) == Finding(StallVerdict.STALLED, StallEvidence.STACKS_UNCHANGED)


def test_moving_stacks_are_never_a_stall_and_are_read_again_after_another_look() -> None:
    clock = steady(0.25, 40)  # last report at 10 s
    judgement = judge(clock, 10.0 + 10 * FLOOR, FLOOR)  # far past the time-only timeout
    moved = StackReading(StackVerdict.MOVED, (), "the stacks of c moved")
    finding = conclude(judgement, moved)
    assert (finding.verdict, finding.evidence) == (StallVerdict.HEALTHY, StallEvidence.STACKS_MOVED)
    clock = clock.looked(110.0)
    assert judge(clock, 110.0 + FLOOR, FLOOR).verdict is StallVerdict.HEALTHY  # read again after another look
    assert judge(clock, 110.0 + FLOOR + 1, FLOOR).verdict is StallVerdict.SUSPECTED
    assert clock.advanced(111.0).looked_at is None  # progress: a new silence


def test_time_decides_where_stacks_tell_nothing_and_is_looked_at_again_once_past_the_timeout() -> None:
    floor = 100.0  # looks after 30 s, time alone after 100 s
    clock = steady(0.25, 40)  # last report at 10 s
    judgement = judge(clock, 41.0, floor)
    assert judgement.verdict is StallVerdict.SUSPECTED and judgement.look_seconds == LOOK_SECONDS
    finding = conclude(judgement, UNREADABLE)
    assert (finding.verdict, finding.evidence) == (StallVerdict.HEALTHY, StallEvidence.TIME_ONLY)
    clock = clock.looked(100.0)  # read at 90 s of silence
    assert judge(clock, 110.0, floor).verdict is StallVerdict.HEALTHY  # 100 s: not past the timeout
    judgement = judge(clock, 111.0, floor)  # past it: read again now, not a look later
    assert judgement.verdict is StallVerdict.SUSPECTED
    assert conclude(judgement, UNREADABLE).verdict is StallVerdict.STALLED
    unclear = StackReading(StackVerdict.UNCLEAR, (), "nothing moved and no task stands out")
    assert conclude(judgement, unclear).verdict is StallVerdict.STALLED


def test_each_judgement_says_which_evidence_decided() -> None:
    judgement = judge(steady(0.25, 40), 50.0, FLOOR)
    stuck = StackReading(StackVerdict.STUCK, ("w1",), "a thread runs Python inside a TensorFlow op")
    line = describe(judgement, stuck, conclude(judgement, stuck), 5.0, "/s/stall-1")
    assert line == ("no progress for 40 s (stacks read after 10 s); stacks unchanged 5 s apart; suspected: w1 "
                    "(a thread runs Python inside a TensorFlow op); stacks in /s/stall-1")
    moved = StackReading(StackVerdict.MOVED, (), "the stacks of c moved")
    assert describe(judgement, moved, conclude(judgement, moved), 5.0) == \
        "no progress for 40 s: stacks moved, not a stall (the stacks of c moved)"
    line = describe(judgement, UNREADABLE, conclude(judgement, UNREADABLE), 5.0)
    assert line.startswith("no progress for 40 s (stall timeout 10 s); time only (no training task's stacks")


def rules(roles: dict[str, Any], **stall: Any) -> Rules:
    data = {"name": "job", "roles": roles, **({"stall": stall} if stall else {})}
    return Rules.from_plan(api.plan(api.validate_data(data)))


MWMS = {"chief": {}, "worker": {"replicas": 2}}


def test_a_stall_restarts_the_whole_mwms_group_within_the_budget() -> None:
    decision = rules(MWMS).decide(Stalled(("job-worker-1",), "no step for 12 s", False, Used(0)))
    assert decision.action is Action.RESTART and not decision.preemption
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1")
    assert decision.message.startswith("stalled: no step for 12 s") and "restart 1/3" in decision.message
    assert rules(MWMS).decide(Stalled(("job-worker-1",), "x", False, Used(3))).action is Action.FAIL


def test_without_a_suspect_every_training_task_restarts() -> None:
    decision = rules({**MWMS, "evaluator": {}}).decide(Stalled((), "x", False, Used(0)))
    assert decision.restart == ("job-chief-0", "job-worker-0", "job-worker-1")


def test_a_stuck_parameter_server_worker_restarts_alone() -> None:
    decision = rules({"chief": {}, "worker": {"replicas": 2}, "ps": {}}).decide(Stalled(("job-worker-1",), "x", False, Used(0)))
    assert decision.restart == ("job-worker-1",)


def test_fail_and_warn_actions() -> None:
    assert rules(MWMS, action="fail").decide(Stalled(("job-worker-1",), "x", False, Used(0))).action is Action.FAIL
    warn = rules(MWMS, action="warn").decide(Stalled(("job-worker-1",), "x", False, Used(0)))
    assert warn.action is Action.CONTINUE and "warn" in warn.message
    assert rules(MWMS, timeout_seconds=5).policy.stall_floor_seconds == 5


def test_a_stall_after_the_lead_finished_training_is_never_restarted() -> None:
    """Training is over and its backup deleted: a restart would train again from the start; the lead's slow
    export or exit is told instead (and again after each allowance). ``fail`` and ``warn`` act as always."""
    decision = rules(MWMS).decide(Stalled(("job-worker-1",), "no progress for 31 s", True, Used(0)))
    assert decision.action is Action.CONTINUE and not decision.restart
    assert decision.message.startswith("stalled after training finished (warn only") and "31 s" in decision.message
    assert rules(MWMS, action="fail").decide(Stalled((), "x", True, Used(0))).action is Action.FAIL
    warn = rules(MWMS, action="warn").decide(Stalled((), "x", True, Used(0)))
    assert warn.action is Action.CONTINUE and warn.message.startswith("stalled (warn only)")


def test_the_clock_says_finished_from_the_leads_finished_until_a_new_attempt() -> None:
    clock = after_event(steady(0.1, 10), EventKind.FINISHED, 100.0)
    assert clock.finished and clock.since == 100.0 and clock.last_report is None
    assert clock.again(200.0).finished  # a warned stall judged afresh: still the same attempt
    assert not clock.started(300.0).finished  # the group restarted: a new attempt trains again


def times(*values: tuple[float | None, float | None]) -> list[StepBreakdown]:
    return [StepBreakdown(step, data) for step, data in values]


def test_the_task_whose_input_is_slow_is_the_straggler_though_every_step_takes_as_long() -> None:
    found = stragglers({"c": times((0.1, 0.002)), "w0": times((0.1, 0.003)), "w1": times((0.1, 0.08))})
    assert [(s.task, s.measure) for s in found] == [("w1", "input_seconds_per_batch")]
    assert found[0].seconds == 0.08 and found[0].median_seconds == 0.003 and found[0].ratio > 20


def test_with_inputs_alike_the_task_whose_compute_is_slow_is_the_straggler() -> None:
    def report(compute: float, peers: float) -> list[StepBreakdown]:
        return [StepBreakdown(0.2, 0.01, compute, peers)]

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
    def report(input_seconds: float, compute: float) -> list[StepBreakdown]:
        return [StepBreakdown(0.1, input_seconds, compute)]

    found = stragglers({"c": report(0.0012, 0.02), "w0": report(0.0063, 0.02), "w1": report(0.0011, 0.07)})
    assert [(s.task, s.measure) for s in found] == [("w1", "compute_seconds_per_batch")]
    assert stragglers({"c": report(0.0012, 0.02), "w0": report(0.0063, 0.02), "w1": report(0.0011, 0.02)}) == []
    # the same 5 ms in 20 ms steps holds the others up by a quarter of a step: named
    found = stragglers({t: [StepBreakdown(0.02, i, 0.01)] for t, i in (("c", 0.0012), ("w0", 0.0063), ("w1", 0.0011))})
    assert [(s.task, s.measure) for s in found] == [("w0", "input_seconds_per_batch")]


def test_the_window_forgets_old_reports() -> None:
    slow_then_fast = times((0.1, 0.5), (0.1, 0.01), (0.1, 0.01), (0.1, 0.01))
    assert stragglers({"a": times((0.1, 0.01)), "b": times((0.1, 0.01)), "c": slow_then_fast}) == []


def test_after_the_lead_finished_its_exit_gets_the_first_step_allowance_not_the_floor() -> None:
    """CI: a chief's exit after ``finished`` took over 15 s with a 10 s floor, and the finished job was restarted."""
    clock = StallClock(since=0.0).reports()
    for now in (1.0, 1.1, 1.2, 1.3):
        clock = after_event(clock, EventKind.STEP, now)
    assert on_time(clock, 12.0, 10.0) is StallVerdict.STALLED  # silent past the floor while training
    clock = after_event(clock, EventKind.FINISHED, 2.0)
    assert on_time(clock, 20.0, 10.0) is StallVerdict.HEALTHY  # 18 s into its exit: within 3x the floor
    assert on_time(clock, 33.0, 10.0) is StallVerdict.STALLED  # an exit that hangs is still found
