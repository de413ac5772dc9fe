"""``TaskRuns``: starting, polling, stopping and reading one task's output (events, tail, last error, stacks)."""

from __future__ import annotations

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.plan.policy import LOG_LINE_CHARS
from launcher.protocol import events
from launcher.protocol.events import MANUAL_TOKEN
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.supervision.status import State
from launcher.supervision.task_runs import LAST_LINE_CHARS, TaskRun, TaskRuns

EVENT_PREFIX = f"TFCLUSTER_EVENT/{MANUAL_TOKEN} "
FRAME = '  File "/app/train.py", line 3 in step'


def plan() -> Plan:
    return api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}}}))


def started(runtime: ScriptedRuntime) -> tuple[TaskRuns, list[tuple[str, events.Event]]]:
    seen: list[tuple[str, events.Event]] = []
    runs = TaskRuns(plan(), runtime, lambda run, event: seen.append((run.task.name, event)))
    runs.start(runs.runs.values())
    return runs, seen


def test_poll_returns_the_ended_runs_in_plan_order_and_reads_them_to_their_end() -> None:
    runtime = ScriptedRuntime({"job-worker-0": [137], "job-chief-0": [0]}, output={"job-worker-0": ["Killed"]})
    runs, _ = started(runtime)
    assert runs.poll() == [("job-chief-0", 0), ("job-worker-0", 137)]
    worker = runs["job-worker-0"]
    assert (worker.running, worker.status.state, worker.error()) == (False, State.FAILED, "Killed")
    assert runs.exited() == {"job-chief-0": 0, "job-worker-0": 137} and runs.running() == []


def test_a_line_is_an_event_a_stack_line_or_the_tasks_own() -> None:
    failed = EVENT_PREFIX + '{"event":"failed","task":"job-chief-0","time":1,"reason":"OOM in step 3"}'
    lines = ["x" * (2 * LOG_LINE_CHARS), FRAME, failed, "Warning: noise? no: ValueError: bad"]
    runs, seen = started(ScriptedRuntime({"job-chief-0": [None]}, output={"job-chief-0": lines}))
    run = runs["job-chief-0"]
    runs.read(run)
    assert [(name, type(event)) for name, event in seen] == [("job-chief-0", events.Failed)]
    assert run.stack_lines == [FRAME.rstrip()] and FRAME not in run.tail
    assert [len(line) for line in run.tail][0] == LOG_LINE_CHARS and failed not in run.tail
    assert run.error() == "OOM in step 3"  # the failed event's reason before the last line
    assert run.status.last_line == lines[-1][:LAST_LINE_CHARS]


def test_a_stack_dump_is_kept_up_to_its_cap() -> None:
    frames = [FRAME] * (MAX_STACK_BYTES // len(FRAME) + 10)
    runs, _ = started(ScriptedRuntime({"job-chief-0": [None]}, output={"job-chief-0": frames}))
    run: TaskRun = runs["job-chief-0"]
    runs.read(run)
    assert MAX_STACK_BYTES <= run.stack_bytes < MAX_STACK_BYTES + len(FRAME) + 1 and len(run.stack_lines) < len(frames)


def test_stop_reads_the_runs_to_their_end_and_says_why() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None], "job-worker-0": [None]})
    runs, _ = started(runtime)
    runtime.lines["job-worker-0"] = ["saving", "saved"]
    runs.stop([runs["job-worker-0"]], "stopped", 3.0)
    worker = runs["job-worker-0"]
    assert runtime.stopped == ["job-worker-0"] and runtime.graces == [3.0]
    assert (worker.running, worker.status.state, worker.status.message, list(worker.tail)) == (
        False, State.CANCELLED, "stopped", ["saving", "saved"])
    assert [run.task.name for run in runs.running()] == ["job-chief-0"]


def test_a_fresh_start_forgets_the_previous_runs_end() -> None:
    runs, _ = started(ScriptedRuntime({"job-chief-0": [1, None]}, output={"job-chief-0": ["boom"]}))
    runs.poll()
    run = runs["job-chief-0"]
    runs.start([run])
    assert (run.running, run.status.exit_code, run.error(), list(run.tail)) == (True, None, "(no output)", [])


class StartsTogetherRuntime(ScriptedRuntime):
    """A ``StartsTogether`` runtime: its group starts are recorded as one call."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - ScriptedRuntime's
        super().__init__(*args, **kwargs)
        self.together: list[list[str]] = []

    def start_together(self, tasks) -> None:  # noqa: ANN001
        self.together.append([task.name for task in tasks])
        failures = []
        for task in tasks:
            try:
                self.start(task)
            except LaunchError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


def test_a_starts_together_runtime_starts_a_group_in_one_call_and_every_run_counts_as_started_even_when_one_failed(
) -> None:
    runtime = StartsTogetherRuntime({"job-chief-0": [None], "job-worker-0": [None]})
    runs, _ = started(runtime)
    assert runtime.together == [["job-chief-0", "job-worker-0"]] and runs.running() == list(runs.runs.values())
    runs.start([runs["job-chief-0"]])  # one task alone: a plain start
    assert runtime.together == [["job-chief-0", "job-worker-0"]] and runtime.runs["job-chief-0"] == 1
    failing = StartsTogetherRuntime({"job-chief-0": [None], "job-worker-0": [None]}, unstartable=["job-chief-0"])
    runs = TaskRuns(plan(), failing, lambda run, event: None)
    with pytest.raises(LaunchError, match="cannot start job-chief-0"):
        runs.start(runs.runs.values())
    assert failing.runs == {"job-worker-0": 0}  # the other one started, and is stopped as a running one
    assert [run.task.name for run in runs.running()] == ["job-chief-0", "job-worker-0"]
    runs.stop(runs.running(), "stopped", 0.0)
    assert failing.stopped == ["job-chief-0", "job-worker-0"]
