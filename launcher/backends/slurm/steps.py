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

Standbys (``Standbys``): ``prepare`` starts, for each task, a step ``<task>.standby-N`` (``N`` counts this
runtime's standbys: a called one keeps its name, the next one is told apart) on the task's node running
its ``standby_command`` (``launcher.worker.standby --on-signal``: it imports TensorFlow, at the normal priority,
and waits), its srun's output appended to ``<log_dir>/<task>.standby.log``, its env the task's plus ``LOG_ENV`` naming
the task's log. A restart's ``start`` calls a ready one (its step runs, it printed ``READY_LINE``):
``scancel --signal=USR2 JOB.STEP``, and that step, which the allocation already ran, is the task's run from then
on (its srun the one ``poll`` waits for, its step the one ``stop`` and ``dump_stacks`` signal): no new srun,
no second import. A task whose standby is not ready starts afresh, as without one (the standby is cancelled).
``close`` cancels the standbys left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from launcher.backends.lines import LineReader
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.preemption import AllocationWatch
from launcher.errors import LaunchError, TfclusterError
from launcher.plan.planner import Plan, Task
from launcher.protocol.exitcodes import SIGNAL_EXIT_BASE
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.protocol.standby import CALL_SIGNAL, LOG_ENV, READY_LINE
from launcher.supervision.statefile import open_private, private_dir

#: How long a cancelled step's srun gets to exit before it is killed.
CANCEL_WAIT_SECONDS = 30.0
#: A standby step's name is its task's with this suffix and a number.
STANDBY_SUFFIX = ".standby-"


def step_command(task: Task, node: str, workdir: str | None, standby: str | None = None) -> list[str]:
    """The srun command line of ``task`` on ``node`` (``standby``: of its standby, ``Task.standby_command``, a step
    of that name): one task, sharing the allocation's resources."""
    name, command = (standby, task.standby_command) if standby else (task.name, task.command)
    cpus = [f"--cpus-per-task={max(1, int(task.resources.cpu))}"] if task.resources.cpu else []
    gpus = [f"--gpus-per-task={task.resources.gpu}"] if task.resources.gpu else []
    chdir = [f"--chdir={workdir}"] if workdir else []
    return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap", f"--job-name={name}",
            "--kill-on-bad-exit=0", "--input=none", *chdir, *cpus, *gpus, *command]


@dataclass(frozen=True)
class _Standby:
    """A task's standby step: its srun, and its output file with the offset this standby's output starts at."""

    srun: subprocess.Popen[bytes]
    name: str
    output: Path
    offset: int


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
        self._standbys: dict[str, _Standby] = {}
        #: The step of a task's run that was its standby's (named after the standby, not the task).
        self._called: dict[str, str] = {}
        self._prepared = 0
        private_dir(log_dir)

    def log_path(self, task: Task) -> Path:
        return self.log_dir / f"{task.name}.log"

    def start(self, task: Task) -> None:
        path = self.log_path(task)
        self._called.pop(task.name, None)
        with open_private(path) as log:
            offset = log.tell()
            standby = self._call_standby(task)
            if standby is not None:
                self._sruns[task.name] = standby
            else:
                self._sruns[task.name] = self._srun(task, log)
        reader = self._readers[task.name] = LineReader(path)
        reader.offset = offset

    def _srun(self, task: Task, output: IO[bytes], standby: str | None = None) -> subprocess.Popen[bytes]:
        """The srun of ``task``'s step (``standby``: of its standby's, that name, told where the task's log is)."""
        extra = {LOG_ENV: str(self.log_path(task))} if standby else {}
        try:
            return subprocess.Popen(
                step_command(task, self.placement[task.name], self.plan.workdir, standby),
                env={**os.environ, **self.plan.task_env(task), **extra}, stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"cannot start {task.name} (srun): {exc}") from None

    def prepare(self, tasks: Sequence[Task]) -> None:
        for task in tasks:
            waiting = self._standbys.get(task.name)
            if waiting is not None and waiting.srun.poll() is None:
                continue
            self._prepared += 1
            name = f"{task.name}{STANDBY_SUFFIX}{self._prepared}"
            output = self.log_dir / f"{task.name}.standby.log"
            with open_private(output) as log:
                self._standbys[task.name] = _Standby(self._srun(task, log, name), name, output, log.tell())

    def _call_standby(self, task: Task) -> subprocess.Popen[bytes] | None:
        """The srun of the task's standby step, called to become the task; None (the standby, if any, cancelled)
        when it is not ready (not running, no ``READY_LINE`` yet, no step yet) or the controller did not answer."""
        standby = self._standbys.pop(task.name, None)
        if standby is None:
            return None
        step = None
        try:
            if standby.srun.poll() is None and _printed(standby.output, standby.offset, READY_LINE):
                step = slurmctl.steps(self.job_id).get(standby.name)
            if step is not None:
                slurmctl.signal_step(step, CALL_SIGNAL.name.removeprefix("SIG"))
        except TfclusterError:  # the controller did not answer: the task starts afresh
            step = None
        if step is None:
            self._end_standby(standby)
            return None
        self._called[task.name] = step
        return standby.srun

    def _end_standby(self, standby: _Standby) -> None:
        """Cancel a standby's step (its srun, before it is one) and reap its srun."""
        if standby.srun.poll() is None:
            standby.srun.terminate()  # srun kills its step's task at once: a standby has nothing to save
        try:
            standby.srun.wait(CANCEL_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            standby.srun.kill()
            standby.srun.wait()

    def _step(self, name: str, steps: Mapping[str, str]) -> str | None:
        """The step running task ``name``'s current run: its called standby's, else the one named after it."""
        return self._called.get(name) or steps.get(name)

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
            if (step := self._step(name, steps)) is not None:
                slurmctl.signal_step(step, "TERM")
            else:  # not yet a step: srun ends it as it starts
                srun.send_signal(signal.SIGTERM)
        ends = time.monotonic() + grace_seconds
        while any(s.poll() is None for s in running.values()) and time.monotonic() < ends:
            time.sleep(0.1)
        left = {name: srun for name, srun in running.items() if srun.poll() is None}
        if left:
            steps = slurmctl.steps(self.job_id)
            for name in left:
                if (step := self._step(name, steps)) is not None:
                    slurmctl.signal_step(step)
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
            step = self._step(task.name, slurmctl.steps(self.job_id))
            if step is not None:
                slurmctl.signal_step(step, STACKS_SIGNAL.name.removeprefix("SIG"))
        except LaunchError:
            pass  # the controller did not answer: no stacks, the report says so

    def read_stacks(self, task: Task) -> None:
        """None: the program runs on the allocation's nodes, out of this process's reach."""
        return None

    def close(self) -> None:
        """Every task's step was stopped by the supervisor: the standbys' steps left are cancelled (nothing is
        recorded to clean up)."""
        standbys, self._standbys = list(self._standbys.values()), {}
        for standby in standbys:
            self._end_standby(standby)


def _printed(path: Path, offset: int, line: str) -> bool:
    """Whether ``line`` is in ``path`` past ``offset`` (a standby's first line: read the start only)."""
    try:
        with path.open("rb") as output:
            output.seek(offset)
            return line.encode() in output.read(64 * 1024)
    except OSError:
        return False
