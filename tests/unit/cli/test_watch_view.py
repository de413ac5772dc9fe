"""The live status view renders the job's progress for people."""

from __future__ import annotations

from rich.console import Console

from launcher.cli.watch import status_view
from launcher.plan.targets import BackendKind
from launcher.supervision.status import JobStatus, State, TaskStatus


def render(job: JobStatus) -> str:
    console = Console(width=200, record=True)
    console.print(status_view(job))
    return console.export_text()


def test_progress_bar_epochs_from_one_metrics_and_model_path() -> None:
    job = JobStatus("demo", BackendKind.LOCAL, State.SUCCEEDED, [TaskStatus("demo-chief-0", State.SUCCEEDED, 1, 0)],
                    message="succeeded: demo-chief-0 exited 0",
                    progress={"epoch": 2, "epochs": 3, "step": 60, "total_steps": 120, "loss": 0.25,
                              "accuracy": 0.9, "model_path": "/runs/demo/model/model.keras"})
    text = render(job)
    assert "[###############...............] step 60/120 epoch 3/3" in text
    assert "loss 0.2500" in text and "accuracy 0.9000" in text
    assert "model: /runs/demo/model/model.keras" in text
    assert "demo-chief-0" in text and "succeeded: demo-chief-0 exited 0" in text


def test_no_progress_yet_shows_no_bar() -> None:
    text = render(JobStatus("demo", BackendKind.LOCAL, State.PENDING, progress={"epochs": 3}))
    assert "step" not in text and "demo [local]: pending" in text
