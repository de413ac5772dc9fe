"""Taking over the tasks of a supervisor that died (``resume``): each task's run attached, started, or taken as lost.

Contract: ``adopt(previous, runs)`` gives every task its status in ``previous`` (the last one the dead supervisor
published) and attaches to its current run through the runtime's ``adopt``: a task that had ended (terminal) is
left as it was decided; a task that was being (re)started or never started (pending, restarting) and has no live
run is returned to be started; a task with no trace of a run is failed with ``LOST_EXIT`` and returned as an exit
to decide; any other adopted run is running again. Returns ``(to_start, undecided)``. The job's own counters,
progress, goodput and stall status are ``JobRecord.adopted``'s and ``StallWatch.adopted``'s.
"""

from __future__ import annotations

from dataclasses import replace

from launcher.protocol.exitcodes import LOST_EXIT
from launcher.supervision.status import JobStatus, State
from launcher.supervision.task_runs import TaskRun, TaskRuns


def adopt(previous: JobStatus, runs: TaskRuns) -> tuple[list[TaskRun], list[tuple[str, int]]]:
    known = {t.name: t for t in previous.tasks}
    to_start, undecided = [], []
    for name, run in runs.runs.items():
        before = known.get(name)
        if before is not None:
            run.status = replace(before)
        if before is not None and before.state.terminal:
            continue  # its run had ended and was decided on
        adopted = runs.runtime.adopt(run.task)
        fresh = before is None or before.state in (State.PENDING, State.RESTARTING)
        if fresh and (not adopted or runs.runtime.poll(run.task) is not None):
            to_start.append(run)  # being (re)started when the supervisor died, or never started
            continue
        if not adopted:
            run.last_error = f"{name} left no trace while unsupervised: taken as killed"
            run.status.state, run.status.exit_code = State.FAILED, LOST_EXIT
            undecided.append((name, LOST_EXIT))
            continue
        run.running = True
        run.status.state = State.RUNNING
    return to_start, undecided
