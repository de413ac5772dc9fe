"""``StallWatch``: the lead's events move its clock; a stall found is handed to the rules and recorded."""

from __future__ import annotations

import threading

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.plan.planner import Task
from launcher.protocol.events import Step
from launcher.supervision.job_record import JobRecord
from launcher.supervision.rules import Action, Decision, Stalled
from launcher.supervision.stall_watch import StallWatch
from launcher.supervision.task_runs import TaskRuns
from launcher.supervision.tuning import Tuning


def watch(now: list[float]) -> tuple[StallWatch, TaskRuns, JobRecord]:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}}}))
    runs = TaskRuns(plan, ScriptedRuntime({}), lambda run, event: None)
    runs.start(runs.runs.values())
    record = JobRecord(plan, watching=True)
    return StallWatch(plan, runs, record, None, Tuning(poll_seconds=0.0, clock=lambda: now[0]), threading.Event()), runs, record


def test_only_the_leads_progress_moves_the_clock() -> None:
    now = [0.0]
    stalls, runs, _ = watch(now)
    now[0] = 5.0
    stalls.event(runs["job-worker-0"].task, Step(task="job-worker-0", time=5.0, step=1))
    assert stalls.clock.since == 0.0
    stalls.event(runs["job-chief-0"].task, Step(task="job-chief-0", time=5.0, step=1))
    assert stalls.clock.since == 5.0 and stalls.clock.last_report == 5.0


def test_a_stall_on_time_alone_is_decided_by_the_rules_and_recorded() -> None:
    now = [0.0]
    stalls, runs, record = watch(now)
    asked: list[Stalled] = []

    def decide(stalled: Stalled) -> Decision:
        asked.append(stalled)
        return Decision(Action.CONTINUE, message="stalled (warn only)")

    assert stalls.check(decide) is None and asked == []  # healthy: nothing read, nothing decided
    now[0] = 1e6  # far past any timeout; no stacks can be read: time alone decides
    decision = stalls.check(decide)
    assert decision is not None and decision.message == "stalled (warn only)"
    assert len(asked) == 1 and not asked[0].finished and asked[0].what.startswith("no progress for")
    assert record.stall.stalls == 1 and record.stall.last_check == "stalled (warn only)"
    assert stalls.check(decide) is None  # judged afresh from now, with the first-step allowance


class Placed(ScriptedRuntime):
    """A ``Placing`` runtime: the tasks named in ``waiting`` wait for a place to run."""

    def __init__(self) -> None:
        super().__init__({})
        self.waiting: set[str] = set()

    def placing(self, task: Task) -> bool:
        return task.name in self.waiting


def test_a_group_waiting_for_a_place_to_run_is_no_silence_its_first_step_allowance_starts_once_placed() -> None:
    """A gang waiting for room on a shared cluster for longer than any allowance is not a stall; once its tasks
    were all placed, the allowance counts from then, and a silence past it is one."""
    now = [0.0]
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}}}))
    runtime = Placed()
    runtime.waiting = {"job-worker-0"}
    runs = TaskRuns(plan, runtime, lambda run, event: None)
    runs.start(runs.runs.values())
    stalls = StallWatch(plan, runs, JobRecord(plan, watching=True), None,
                        Tuning(poll_seconds=0.0, clock=lambda: now[0]), threading.Event())

    def decide(stalled: Stalled) -> Decision:
        return Decision(Action.CONTINUE, message="stalled")

    now[0] = 1e6  # far past any allowance, the worker still unplaced
    assert stalls.check(decide) is None and stalls.clock.since == 1e6
    runtime.waiting.clear()
    now[0] += 1.0
    assert stalls.check(decide) is None  # placed: the allowance counts from its last unplaced round
    now[0] += 1e6
    assert stalls.check(decide) is not None  # silent past the allowance once placed: a stall
