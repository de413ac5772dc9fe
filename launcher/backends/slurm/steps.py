"""The Slurm ``Runtime``: each task is one ``srun`` job step pinned to its node of the allocation.

Contract: runs inside the allocation (``SLURM_JOB_ID`` set). ``start`` runs
``srun --nodes=1 --ntasks=1 --nodelist=NODE --overlap --job-name=TASK ...
COMMAND`` (an argument list) with ``{**os.environ, **plan.task_env(task)}``
in ``plan.workdir``, its output (the task's stdout and stderr, forwarded by
srun unlabelled: the program's lines as the event reader takes them) appended to
``<log_dir>/<task>.log`` on the shared filesystem (the dir ``0700``, the logs
``0600``: a task's output may echo its env; ``launcher.supervision.statefile``,
also when the batch script was submitted by hand from a ``render -d`` directory).
``poll`` is srun's exit code, the task's (128+N for signal N), except that a step
that ended with its allocation (``preemption.AllocationWatch``: Slurm's preemption has its one home there)
still reads as running.
``stop``
sends SIGTERM to the steps' tasks (``scancel --signal=TERM JOB.STEP``: srun
itself would kill them at once, with no time to save), waits up to the
grace, then cancels the steps that are left and waits for their sruns.
``dump_stacks`` signals the task's step with ``STACKS_SIGNAL`` (``scancel --signal=USR1 JOB.STEP``).
There is nothing to adopt: a new allocation starts every task afresh.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.backends.lines import LineReader
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.preemption import AllocationWatch
from launcher.errors import LaunchError
from launcher.plan.planner import Plan, Task
from launcher.protocol.exitcodes import SIGNAL_EXIT_BASE
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.supervision.statefile import open_private, private_dir

#: How long a cancelled step's srun gets to exit before it is killed.
CANCEL_WAIT_SECONDS = 30.0


def step_command(task: Task, node: str, workdir: str | None) -> list[str]:
    """The srun command line of ``task`` on ``node``: one task, sharing the allocation's resources."""
    cpus = [f"--cpus-per-task={max(1, int(task.resources.cpu))}"] if task.resources.cpu else []
    gpus = [f"--gpus-per-task={task.resources.gpu}"] if task.resources.gpu else []
    chdir = [f"--chdir={workdir}"] if workdir else []
    return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap", f"--job-name={task.name}",
            "--kill-on-bad-exit=0", "--input=none", *chdir, *cpus, *gpus, *task.command]


class StepRuntime:
    """Runs the (resolved) plan's tasks as srun steps of allocation ``job_id`` (see the module contract)."""

    def __init__(self, plan: Plan, placement: Mapping[str, str], log_dir: Path, job_id: str, restarts: int):
        self.plan = plan
        self.placement = dict(placement)
        self.log_dir = log_dir
        self.job_id = job_id
        self._allocation = AllocationWatch(job_id, restarts)
        self._sruns: dict[str, subprocess.Popen[bytes]] = {}
        self._readers: dict[str, LineReader] = {}
        private_dir(log_dir)

    def start(self, task: Task) -> None:
        path = self.log_dir / f"{task.name}.log"
        with open_private(path) as log:
            offset = log.tell()
            try:
                self._sruns[task.name] = subprocess.Popen(
                    step_command(task, self.placement[task.name], self.plan.workdir),
                    env={**os.environ, **self.plan.task_env(task)}, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )
            except OSError as exc:
                raise LaunchError(f"cannot start {task.name} (srun): {exc}") from None
        reader = self._readers[task.name] = LineReader(path)
        reader.offset = offset

    def adopt(self, task: Task) -> bool:
        return False

    def poll(self, task: Task) -> int | None:
        srun = self._sruns.get(task.name)
        code = None if srun is None else srun.poll()
        if code is None:
            return None
        if self._allocation.ending():
            return None  # it ended with the allocation: the batch step's own SIGTERM, under way, ends the job
        return SIGNAL_EXIT_BASE - code if code < 0 else code

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None:
        running = {t.name: self._sruns[t.name] for t in tasks if t.name in self._sruns
                   and self._sruns[t.name].poll() is None}
        if not running:
            return
        steps = slurmctl.steps(self.job_id)
        for name, srun in running.items():
            if name in steps:
                slurmctl.signal_step(steps[name], "TERM")
            else:  # not yet a step: srun ends it as it starts
                srun.send_signal(signal.SIGTERM)
        ends = time.monotonic() + grace_seconds
        while any(s.poll() is None for s in running.values()) and time.monotonic() < ends:
            time.sleep(0.1)
        left = {name: srun for name, srun in running.items() if srun.poll() is None}
        if left:
            steps = slurmctl.steps(self.job_id)
            for name in left:
                if name in steps:
                    slurmctl.signal_step(steps[name])
        ends = time.monotonic() + CANCEL_WAIT_SECONDS
        for srun in left.values():
            try:
                srun.wait(max(0.0, ends - time.monotonic()))
            except subprocess.TimeoutExpired:
                srun.kill()
                srun.wait()

    def output(self, task: Task) -> list[str]:
        reader, srun = self._readers.get(task.name), self._sruns.get(task.name)
        return [] if reader is None else reader.read(final=srun is not None and srun.poll() is not None)

    def dump_stacks(self, task: Task) -> None:
        """``STACKS_SIGNAL`` to the task's program through its step (the step runs the program itself, no wrapper)."""
        srun = self._sruns.get(task.name)
        if srun is None or srun.poll() is not None:
            return
        try:
            step = slurmctl.steps(self.job_id).get(task.name)
            if step is not None:
                slurmctl.signal_step(step, STACKS_SIGNAL.name.removeprefix("SIG"))
        except LaunchError:
            pass  # the controller did not answer: no stacks, the report says so

    def read_stacks(self, task: Task) -> None:
        """None: the program runs on the allocation's nodes, out of this process's reach."""
        return None

    def close(self) -> None:
        """Every step was stopped by the supervisor; nothing is recorded to clean up."""
