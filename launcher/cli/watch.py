"""Follow a running cluster through its backend: a live status view, then the job's exit code.

Contract: ``watch`` polls ``Backend.describe`` until the job is terminal and
returns 0 if it succeeded, 1 if it failed, 130 after Ctrl-C (having stopped
the cluster first, so nothing is left running). A backend error (an API
server or engine that does not answer) is retried ``FAULT_RETRIES`` times
in a row before the watch gives up with exit 1, saying the cluster may
still run and how to re-attach.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table

from launcher.backends.interface import Backend
from launcher.cli import terminal
from launcher.errors import TfclusterError
from launcher.protocol.job_progress import JobProgress
from launcher.supervision.status import JobStatus, State, SupervisorState
from launcher.supervision.stragglers import StepBreakdown

POLL_SECONDS = 1.0
#: Poll rounds in a row that may fail on a backend error before the watch gives up.
FAULT_RETRIES = 10


def status_view(job: JobStatus) -> Group:
    timed = any(task.step_time is not None for task in job.tasks)
    table = Table("task", "state", "restarts", "preempted", "exit", *(["ms/step (input, compute, peers)"] if timed else []),
                  "message")
    reports_progress = job.progress.reported  # then a task's ordinary output is noise here
    for task in job.tasks:
        exit_code = "" if task.exit_code is None else str(task.exit_code)
        times = [_breakdown(task.step_time)] if timed else []
        table.add_row(task.name, task.state.value, str(task.restarts), str(task.preemptions), exit_code, *times,
                      task.message or ("" if reports_progress else task.last_line))
    note = f": {job.supervisor_note}" if job.supervisor_note else ""
    lost = f" (supervisor {job.supervisor.value}{note})" if job.supervisor in (SupervisorState.LOST,
                                                                               SupervisorState.STARTING) else ""
    counts = f" (restarts {job.restarts}, preemptions {job.preemptions})" if job.restarts or job.preemptions else ""
    header = terminal.styled(f"{job.name} [{job.backend.value}]: {job.state.value}{counts}{lost}", "bold")
    lines: list[Any] = [header, table]
    line = _progress_line(job.progress)
    if line:
        lines.append(terminal.styled(line, ""))
    if job.message:
        lines.append(terminal.styled(job.message, ""))
    if job.goodput is not None and job.goodput.wall_seconds > 0:
        lines.append(terminal.styled(job.goodput.line(), ""))
    for slow in job.stragglers:
        measure = MEASURE_NAMES.get(slow.measure, slow.measure)
        lines.append(terminal.styled(f"straggler: {slow.task}: {measure} {slow.seconds * 1000:.0f} ms, {slow.ratio}x "
                                     f"the median {slow.median_seconds * 1000:.0f} ms", "yellow"))
    if job.stall is not None and job.stall.stalls:
        lines.append(terminal.styled(f"stalls: {job.stall.stalls}; last: {job.stall.message}", "yellow"))
    elif job.stall is not None and not job.stall.watching and not job.state.terminal:
        lines.append(terminal.styled("stall watchdog: no step reports from this program, it cannot see steps", ""))
    if job.stall is not None and job.stall.last_check and job.stall.last_check not in job.stall.message \
            and not job.state.terminal:  # a suspected stall the stacks or the time cleared
        lines.append(terminal.styled(f"stall watchdog, last check: {job.stall.last_check}", ""))
    return Group(*lines)


#: How the live view names a straggler's measure (``launcher.supervision.stragglers.MEASURES``).
MEASURE_NAMES = {"input_seconds_per_batch": "input", "compute_seconds_per_batch": "compute",
                 "seconds_per_step": "step"}


def _breakdown(times: StepBreakdown | None) -> str:
    """A task's step-time breakdown in ms: ``120 (10, 30, 80)``; ``-`` where a part is not measured."""
    if times is None:
        return ""
    total, *parts = (None if v is None else _figure(v * 1000, 0) for v in (
        times.seconds_per_step, times.input_seconds_per_batch, times.compute_seconds_per_batch,
        times.peer_wait_seconds_per_step))
    return f"{total or '-'} ({', '.join(p or '-' for p in parts)})"


#: The progress bar's width in characters.
BAR = 30


def _progress_line(progress: JobProgress) -> str:
    """The job's progress on one line; the bar is ``BAR`` wide whatever the numbers (a step beyond the total, or
    below 0 in a status from elsewhere, fills it or leaves it empty)."""
    epoch, epochs = progress.epoch, progress.epochs
    step, total = progress.step, progress.total_steps
    bar = ""
    if step is not None and total is not None and total > 0:
        done = max(0, min(BAR * step // total, BAR))  # integers: exact, and no float overflow for any count
        bar = f"[{'#' * done}{'.' * (BAR - done)}] step {step}/{total} "
    parts = [bar + (f"epoch {epoch + 1}" + (f"/{epochs}" if epochs else "") if epoch is not None else "")]  # epochs count from 0
    shown = {"loss": progress.loss, "accuracy": progress.metrics.get("accuracy")}
    parts += [f"{k} {_figure(v, 4)}" for k, v in shown.items() if v is not None]
    if progress.backup_every_steps and not progress.model_path:
        reason = f": {progress.backup_reason}" if progress.backup_reason else ""
        parts.append(f"backup every {progress.backup_every_steps} steps{reason}")
    if progress.model_path:
        parts.append(f"model: {progress.model_path}")
    return "  ".join(p for p in parts if p)


def _figure(value: float, decimals: int) -> str:
    """A number for people with ``decimals`` decimals; from a million on, four significant figures (``1.2e+300``: a
    diverged loss or a task's absurd step time stays a few characters wide)."""
    return f"{value:.{decimals}f}" if abs(value) < 1e6 else f"{value:.4g}"


def print_status(job: JobStatus) -> None:
    terminal.console().print(status_view(job))


def stop_after_interrupt(backend: Backend, name: str, console: terminal.EscapingConsole) -> None:
    """Ctrl-C: stop every task, keep logs and status where the backend can."""
    console.print(f"interrupted: stopping {name} (`tfcluster logs {name}` still works; `tfcluster down {name}` removes it)")
    backend.stop(name)


def watch(backend: Backend, name: str, poll_seconds: float = POLL_SECONDS) -> int:
    console = terminal.console()
    job: JobStatus | None = None
    faults = 0
    try:
        with terminal.live(console) as live:
            while True:
                try:
                    for action in backend.adopt(name):
                        console.print(action)
                    job = backend.describe(name)
                except TfclusterError as exc:
                    faults += 1
                    console.print(f"{name}: {exc} (attempt {faults}/{FAULT_RETRIES})")
                    if faults >= FAULT_RETRIES:
                        console.print(f"giving up watching {name}; it may still run: `tfcluster watch {name}` re-attaches")
                        return 1
                    time.sleep(poll_seconds)
                    continue
                faults = 0
                if job is None:
                    console.print(f"{name}: no longer known to the backend")
                    return 1
                live.update(status_view(job))
                if job.state.terminal:
                    break
                time.sleep(poll_seconds)
    except KeyboardInterrupt:
        stop_after_interrupt(backend, name, console)
        return 130
    return 0 if job is not None and job.state is State.SUCCEEDED else 1
