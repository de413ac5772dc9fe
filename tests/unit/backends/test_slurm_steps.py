"""The Slurm runtime's task logs, with a stand-in ``srun`` on PATH (no Slurm needed): what a task prints is its owner's.

The real workflow (``render -d`` and ``sbatch`` by hand) is in tests/integration/test_slurm_sbatch_workflow.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.polling import wait_for_condition
from launcher import api
from launcher.backends.slurm import preemption
from launcher.backends.slurm.steps import StepRuntime
from launcher.plan.planner import Task


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The umask most users have: new files 0644, new directories 0755, unless made private."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_task_logs_and_their_dir_are_private_to_their_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            open_umask: None) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\necho \"API_TOKEN=$API_TOKEN\"\n")  # the step's output: the task's
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'JobId=1 JobState=RUNNING Restarts=0'\n")  # its job runs on
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {"command": ["true"]}},
                                       "env": {"API_TOKEN": "s3cr3t"}}, "slurm"), "slurm")
    task = plan.tasks[0]
    logs = tmp_path / "submit" / "logs"
    runtime = StepRuntime(plan, {task.name: "n1"}, logs, "1", restarts=0)
    runtime.start(task)
    wait_for_condition(lambda: runtime.poll(task) is not None)
    log = logs / f"{task.name}.log"
    assert log.read_text() == "API_TOKEN=s3cr3t\n"
    assert (oct(logs.stat().st_mode & 0o777), oct(log.stat().st_mode & 0o777)) == (oct(0o700), oct(0o600))



def started_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exit_code: int, job: str) -> tuple[StepRuntime, Task]:
    """One task's step of allocation 7 (its first: restart count 0) that ends with ``exit_code`` at once; the stand-in
    ``scontrol`` describes the job as ``job`` and appends a line to ``tmp_path/asked`` each time it is asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/sh\nexit {exit_code}\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\necho asked >>{tmp_path / 'asked'}\necho 'JobId=7 {job} NodeList=n[1-3]'\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {"command": ["true"]}}}, "slurm"), "slurm")
    task = plan.tasks[0]
    runtime = StepRuntime(plan, {task.name: "n1"}, tmp_path / "logs", "7", restarts=0)
    runtime.start(task)
    return runtime, task


@pytest.mark.parametrize(("job", "ended_with_it"), [
    ("JobState=RUNNING Restarts=0", False),     # a task of its own failed or was preempted: the supervisor decides
    ("JobState=COMPLETING Restarts=1", True),   # requeued (a node lost): what scontrol shows as the steps get SIGTERM
    ("JobState=CANCELLED Restarts=0", True),    # scancel (down)
    ("JobState=TIMEOUT Restarts=0", True),
    ("JobState=RUNNING Restarts=1", True),      # already running again in the next allocation
])
def test_a_step_slurm_ends_with_its_allocation_reads_as_running_until_the_batch_steps_sigterm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str, ended_with_it: bool) -> None:
    runtime, task = started_step(tmp_path, monkeypatch, 143, job)  # the task's end by SIGTERM, as srun reports it
    asked = tmp_path / "asked"
    wait_for_condition(lambda: runtime.poll(task) is not None or asked.exists())
    assert runtime.poll(task) == (None if ended_with_it else 143)
    assert asked.read_text().count("asked") == (1 if ended_with_it else 2)  # an allocation's end: asked once, kept


@pytest.mark.parametrize(("job", "reads"), [
    ("JobState=RUNNING Restarts=0", 0),        # the task succeeded
    ("JobState=COMPLETING Restarts=1", None),  # the srun of a step on a lost node exits 0 (seen on the real cluster)
])
def test_a_step_that_succeeded_is_over_unless_its_allocation_is_ending(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str, reads: int | None) -> None:
    runtime, task = started_step(tmp_path, monkeypatch, 0, job)
    asked = tmp_path / "asked"
    wait_for_condition(lambda: runtime.poll(task) is not None or asked.exists())
    assert runtime.poll(task) == reads


@pytest.mark.parametrize(("silence", "reads"), [(preemption.SILENT_CONTROLLER_SECONDS, None), (0.0, 143)])
def test_while_the_controller_is_silent_an_ended_step_reads_as_running_for_a_bounded_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silence: float, reads: int | None) -> None:
    """Busy with the node failure that ends the allocation, the controller may not answer: the step's end waits for
    its answer (asked again at each poll), up to ``SILENT_CONTROLLER_SECONDS``; then its code counts."""
    runtime, task = started_step(tmp_path, monkeypatch, 143, "")
    (tmp_path / "bin" / "scontrol").write_text(
        f"#!/bin/sh\necho asked >>{tmp_path / 'asked'}\necho 'slurm_load_jobs error: Socket timed out' >&2\nexit 1\n")
    monkeypatch.setattr(preemption, "SILENT_CONTROLLER_SECONDS", silence)
    asked = tmp_path / "asked"
    wait_for_condition(lambda: runtime.poll(task) is not None or asked.exists())
    assert runtime.poll(task) == reads
    assert asked.read_text().count("asked") == 2  # asked again at the next poll
