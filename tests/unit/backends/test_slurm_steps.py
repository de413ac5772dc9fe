"""The Slurm runtime's task logs, with a stand-in ``srun`` on PATH (no Slurm needed): what a task prints is its owner's.

The real workflow (``render -d`` and ``sbatch`` by hand) is in tests/integration/test_slurm_sbatch_workflow.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.polling import wait_for_condition
from launcher import api
from launcher.backends.slurm import preemption
from launcher.backends.slurm.steps import StepRuntime
from launcher.plan.planner import Task
from launcher.protocol.standby import LOG_ENV, READY_LINE


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


#: Stand-ins for Slurm's commands, real processes: ``srun`` runs its command as its child (a step ``7.<pid>`` named
#: by ``--job-name``, recorded in ``steps``; each srun counted in ``sruns``) and ends it on SIGTERM; ``squeue`` lists
#: the steps that run; ``scancel [--signal=SIG] 7.PID`` signals one (SIGKILL without ``--signal``).
FAKE_SLURM = {
    "srun": """
import os, signal, subprocess, sys
args = sys.argv[1:]
name = next(a.split("=", 1)[1] for a in args if a.startswith("--job-name="))
command = args[next(i for i, a in enumerate(args) if not a.startswith("--")):]
with open(os.path.join(DIR, "sruns"), "a") as sruns:
    sruns.write(name + "\\n")
child = subprocess.Popen(command)
with open(os.path.join(DIR, "steps"), "a") as steps:
    steps.write(f"7.{child.pid}|{name}\\n")
signal.signal(signal.SIGTERM, lambda *_: child.kill())
code = child.wait()
sys.exit(128 - code if code < 0 else code)
""",
    "squeue": """
import os
for line in open(os.path.join(DIR, "steps")):
    step = line.split("|")[0]
    try:
        os.kill(int(step.split(".")[1]), 0)
    except ProcessLookupError:
        continue
    print(line.strip())
""",
    "scancel": """
import os, signal, sys
args = sys.argv[1:]
sig = next((getattr(signal, "SIG" + a.split("=")[1]) for a in args if a.startswith("--signal=")), signal.SIGKILL)
os.kill(int(args[-1].split(".")[1]), sig)
""",
}

#: Stands in for ``launcher.worker.standby --on-signal`` (which imports TensorFlow): says it is ready, waits for
#: ``CALL_SIGNAL``, then writes to the log ``LOG_ENV`` names and exits 7.
SLURM_STANDBY = f"""
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR2}})
print({READY_LINE!r}, flush=True)
signal.sigwait({{signal.SIGUSR2}})
out = os.open(os.environ[{LOG_ENV!r}], os.O_WRONLY | os.O_APPEND)
os.dup2(out, 1)
print("ran in the standby", flush=True)
sys.exit(7)
"""


def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standby: str) -> tuple[StepRuntime, Task]:
    """A runtime on the stand-in Slurm, for one worker that prints ``afresh`` and has ``standby`` as its standby."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "steps").touch()
    for tool, code in FAKE_SLURM.items():
        (bin_dir / tool).write_text(f"#!{sys.executable}\nDIR = {str(tmp_path)!r}\n{code}")
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'JobId=7 JobState=RUNNING Restarts=0'\n")
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    roles = {"worker": {"command": [sys.executable, "-c", "print('afresh', flush=True)"]}}
    plan = api.plan(api.validate_data({"name": "job", "roles": roles}, "slurm"), "slurm")
    task = plan.tasks[0].model_copy(update={"standby_command": [sys.executable, "-c", standby]})
    return StepRuntime(plan, {task.name: "n1"}, tmp_path / "logs", "7", restarts=0), task


def sruns(tmp_path: Path) -> list[str]:
    return (tmp_path / "sruns").read_text().split()


def test_a_restart_becomes_the_standby_step_the_allocation_already_runs_without_a_new_srun(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, task = fake_slurm(tmp_path, monkeypatch, SLURM_STANDBY)
    runtime.start(task)
    wait_for_condition(lambda: runtime.poll(task) is not None)
    runtime.prepare([task])
    standby_log = tmp_path / "logs" / f"{task.name}.standby.log"
    wait_for_condition(lambda: standby_log.exists() and READY_LINE in standby_log.read_text())
    [standby_step] = [line.split("|")[0] for line in (tmp_path / "steps").read_text().splitlines()
                      if line.endswith(".standby-1")]
    runtime.start(task)  # the restart
    wait_for_condition(lambda: runtime.poll(task) is not None)
    assert runtime.poll(task) == 7  # the standby's code is the run's
    assert sruns(tmp_path) == [task.name, f"{task.name}.standby-1"], "the restart started a new srun"
    assert [line.strip() for line in runtime.output(task)] == ["ran in the standby"]
    assert runtime._called[task.name] == standby_step  # stop and dump_stacks signal that step
    runtime.close()


def test_a_standby_that_is_not_ready_is_cancelled_and_the_task_starts_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, task = fake_slurm(tmp_path, monkeypatch, "import time; time.sleep(600)")  # never says it is ready
    runtime.prepare([task])
    wait_for_condition(lambda: ".standby" in (tmp_path / "steps").read_text())
    standby = runtime._standbys[task.name].srun
    runtime.start(task)
    wait_for_condition(lambda: runtime.poll(task) is not None)
    assert runtime.poll(task) == 0 and standby.poll() is not None
    assert sruns(tmp_path) == [f"{task.name}.standby-1", task.name]
    assert [line.strip() for line in runtime.output(task)] == ["afresh"]
    runtime.close()
