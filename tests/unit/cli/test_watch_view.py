"""The live status view renders the job's progress for people."""

from __future__ import annotations

import pytest
from rich.console import Console

from launcher.cli.watch import BAR, FAULT_RETRIES, status_view, watch
from launcher.errors import LaunchError
from launcher.plan.targets import BackendKind
from launcher.protocol.job_progress import JobProgress
from launcher.supervision.status import JobStatus, State, TaskStatus
from launcher.supervision.stragglers import StepBreakdown


def render(job: JobStatus) -> str:
    console = Console(width=200, record=True)
    console.print(status_view(job))
    return console.export_text()


def test_progress_bar_epochs_from_one_metrics_and_model_path() -> None:
    job = JobStatus("demo", BackendKind.LOCAL, State.SUCCEEDED, [TaskStatus("demo-chief-0", State.SUCCEEDED, 1, 0)],
                    message="succeeded: demo-chief-0 exited 0",
                    progress=JobProgress(epoch=2, epochs=3, step=60, total_steps=120, loss=0.25,
                                         metrics={"accuracy": 0.9}, model_path="/runs/demo/model/model.keras"))
    text = render(job)
    assert "[###############...............] step 60/120 epoch 3/3" in text
    assert "loss 0.2500" in text and "accuracy 0.9000" in text
    assert "model: /runs/demo/model/model.keras" in text
    assert "demo-chief-0" in text and "succeeded: demo-chief-0 exited 0" in text


def test_no_progress_yet_shows_no_bar() -> None:
    text = render(JobStatus("demo", BackendKind.LOCAL, State.PENDING, progress=JobProgress(epochs=3)))
    assert "step" not in text and "demo [local]: pending" in text


def test_a_tasks_last_line_shows_only_for_programs_that_report_no_progress() -> None:
    tasks = [TaskStatus("t-worker-0", State.RUNNING, last_line="epoch 1/3 - loss 0.4")]
    plain = render(JobStatus("t", BackendKind.LOCAL, State.RUNNING, tasks))
    assert "epoch 1/3 - loss 0.4" in plain
    tasks = [TaskStatus("t-worker-0", State.RUNNING, last_line="W dataset.cc:997] will not be optimized")]
    reporting = render(JobStatus("t", BackendKind.LOCAL, State.RUNNING, tasks, progress=JobProgress(epochs=3)))
    assert "dataset.cc" not in reporting


class FlakyBackend:
    """describe fails ``faults`` times (an API server that does not answer), then reports success."""

    def __init__(self, faults: int):
        self.faults = faults

    def adopt(self, name: str) -> list[str]:
        return []

    def describe(self, name: str) -> JobStatus:
        if self.faults:
            self.faults -= 1
            raise LaunchError("cannot list Jobs: Kubernetes API at https://k8s unreachable (ProtocolError)")
        return JobStatus(name, BackendKind.K8S, State.SUCCEEDED)


def test_watch_rides_out_transient_backend_errors() -> None:
    assert watch(FlakyBackend(faults=3), "demo", poll_seconds=0) == 0  # type: ignore[arg-type]


def test_watch_gives_up_on_a_backend_that_stays_down_and_says_how_to_reattach(capsys) -> None:
    assert watch(FlakyBackend(faults=FAULT_RETRIES), "demo", poll_seconds=0) == 1  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert f"attempt {FAULT_RETRIES}/{FAULT_RETRIES}" in out and "`tfcluster watch demo` re-attaches" in out


def test_status_text_counts_preemptions_apart_from_restarts() -> None:
    job = JobStatus("p", BackendKind.LOCAL, State.RUNNING, [TaskStatus("p-chief-0", State.RUNNING, 1, None, "", 2)],
                    restarts=1, preemptions=2)
    console = Console(width=200, record=True)
    console.print(status_view(job))
    text = console.export_text()
    assert "(restarts 1, preemptions 2)" in text and "preempted" in text
    assert JobStatus.from_dict(job.to_dict()) == job


def test_the_view_shows_stalls_stragglers_and_an_unwatched_program() -> None:
    from launcher.supervision.stall import StallEvidence
    from launcher.supervision.status import StallStatus
    from launcher.supervision.stragglers import StepBreakdown, Straggler

    stalled = JobStatus("t", BackendKind.LOCAL, State.RUNNING,
                        stall=StallStatus(True, 1, "no progress for 31 s; suspected: t-worker-1", ["t-worker-1"]),
                        stragglers=[Straggler("t-worker-2", "input_seconds_per_batch", 0.09, 0.003, 30.0)])
    text = render(stalled)
    assert "stalls: 1; last: no progress for 31 s; suspected: t-worker-1" in text
    assert "straggler: t-worker-2: input 90 ms, 30.0x the median 3 ms" in text
    slow = Straggler("t-worker-2", "compute_seconds_per_batch", 0.09, 0.003, 30.0)
    timed = JobStatus("t", BackendKind.LOCAL, State.RUNNING, stragglers=[slow], tasks=[
        TaskStatus("t-worker-1", State.RUNNING, step_time=StepBreakdown(0.1, 0.002, 0.003, 0.095)),
        TaskStatus("t-worker-2", State.RUNNING, step_time=StepBreakdown(0.1, 0.002, 0.09, None)),
        TaskStatus("t-ps-0", State.RUNNING)])
    text = render(timed)
    assert "straggler: t-worker-2: compute 90 ms, 30.0x the median 3 ms" in text
    assert "ms/step (input, compute, peers)" in text
    assert "100 (2, 3, 95)" in text and "100 (2, 90, -)" in text
    assert JobStatus.from_dict(timed.to_dict()) == timed
    assert "cannot see steps" in render(JobStatus("t", BackendKind.LOCAL, State.RUNNING, stall=StallStatus(False)))
    assert "cannot see steps" not in render(JobStatus("t", BackendKind.LOCAL, State.RUNNING, stall=StallStatus(True)))
    checked = StallStatus(True, evidence=StallEvidence.STACKS_MOVED, last_check="no progress for 40 s: stacks moved, "
                          "not a stall (the stacks of t-chief-0 moved between the samples)")
    job = JobStatus("t", BackendKind.LOCAL, State.RUNNING, stall=checked)
    assert "stall watchdog, last check: no progress for 40 s: stacks moved, not a stall" in render(job)
    assert job.to_dict()["stall"]["evidence"] == "stacks_moved" and JobStatus.from_dict(job.to_dict()) == job


def test_the_view_shows_the_goodput_fraction_and_the_biggest_loss() -> None:
    from launcher.supervision.goodput import Goodput, LostSeconds

    goodput = Goodput(wall_seconds=412.3, productive_seconds=351.0, fraction=0.851, recomputed_steps=38,
                      lost_seconds=LostSeconds(start_up=21.4, restarts=17.9, recomputation=9.6, backups=6.2,
                                               input_wait=4.1, evaluation=2.1))
    job = JobStatus("g", BackendKind.LOCAL, State.SUCCEEDED, goodput=goodput)
    assert "goodput 85% of 7 min; most lost to start up: 21 s" in render(job)
    assert JobStatus.from_dict(job.to_dict()) == job
    assert job.to_dict()["goodput"]["lost_seconds"]["start_up"] == 21.4


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("step", "total"), [(-10**12, 100), (-1, 1), (10**18, 1), (5, -10**15), (10**15, 10**15),
                                             (3, 2**63), (-2**63, 3)])
def test_the_progress_bar_is_as_wide_whatever_the_numbers(step: int, total: int) -> None:
    """The fold only holds events' bounded counts; a status from elsewhere (an older supervisor, a hand-made
    document) still draws one bar of ``BAR`` characters: a negative step once built a string of its size."""
    text = render(JobStatus("demo", BackendKind.LOCAL, State.RUNNING,
                            progress=JobProgress(step=step, total_steps=total, epoch=0, loss=-1.7e308)))
    [line] = [line for line in text.splitlines() if "loss" in line]
    assert len(line) < 200 and "loss -1.7e+308" in line
    bar = line[line.index("[") + 1:line.index("]")] if total > 0 else ""
    assert len(bar) == (BAR if total > 0 else 0) and set(bar) <= {"#", "."}


def test_a_step_time_of_any_size_keeps_its_column_short() -> None:
    task = TaskStatus("t-worker-0", State.RUNNING, step_time=StepBreakdown(seconds_per_step=1e300, input_seconds_per_batch=0.01))
    assert "1e+303 (10, -, -)" in render(JobStatus("t", BackendKind.LOCAL, State.RUNNING, [task]))
