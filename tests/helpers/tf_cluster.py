"""Run a planned cluster as real loopback processes through the shared entrypoint.

Contract: ``run_cluster(spec, run_id)`` plans ``spec`` for the local backend
(``launcher.api.plan(..., launching=True)``), starts every task with
``subprocess.Popen(task.command, env={**os.environ, **plan.task_env(task)})``
and waits for all of them (killing the rest after ``timeout``);
``cluster_file=True`` starts them from ``TFCLUSTER_CLUSTER_FILE`` instead. It returns
each task's exit code, output and parsed events (read with the run's token). ``start_cluster`` returns
the running processes for tests that interrupt them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.api import plan as make_plan
from launcher.api import validate_data
from launcher.plan.planner import Plan, Task
from launcher.protocol.events import EventReader

TF_QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}


@dataclass
class TaskResult:
    returncode: int | None
    output: str
    token: str  # the run's event token (``Plan.event_token``)

    @property
    def events(self) -> list[Any]:
        return [e for e in map(EventReader(self.token).parse, self.output.split("\n")) if e is not None]

    def of(self, kind: str) -> list[Any]:
        """This task's events of ``kind`` (typed ``launcher.protocol.events`` models)."""
        return [e for e in self.events if e.event == kind]


@dataclass
class RunningCluster:
    plan: Plan
    procs: dict[str, subprocess.Popen]
    logs: dict[str, Path] = field(default_factory=dict)

    def wait(self, timeout: float) -> dict[str, TaskResult]:
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return {name: TaskResult(proc.returncode, self.logs[name].read_text(), self.plan.event_token)
                for name, proc in self.procs.items()}

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()

    def output(self, name: str) -> str:
        return self.logs[name].read_text()


def cluster_spec(name: str, roles: dict[str, int], checkpoint_dir: Path, **fields: Any):
    """A validated spec with ``roles`` as ``{role: replicas}``; ``fields`` override top-level keys."""
    data = {
        "name": name,
        "roles": {role: {"replicas": n} for role, n in roles.items()},
        "checkpoint": {"dir": str(checkpoint_dir), "backup_every_steps": None},
        "training": {"epochs": 2, "steps_per_epoch": 10, "batch_size_per_replica": 32},
        **fields,
    }
    return validate_data(data)


def cluster_file_env(plan: Plan, task: Task, directory: Path) -> dict[str, str]:
    """The task's environment with TF_CONFIG replaced by the shared cluster file (as on Kubernetes)."""
    path = directory / "cluster.json"
    path.write_text(json.dumps(plan.cluster))
    return {
        **task.env,
        "TFCLUSTER_CLUSTER_FILE": str(path),
        "TFCLUSTER_TASK_TYPE": task.type.value,
        "JOB_COMPLETION_INDEX": str(task.index),
        "TFCLUSTER_TASK_ADDRESS": task.address,
    }


def start_cluster(spec, run_id: str, *, cluster_file: bool = False, only: set[str] | None = None) -> RunningCluster:
    """Start every task (or those named in ``only``); ``cluster_file`` gives them the cluster file instead of TF_CONFIG."""
    plan = make_plan(spec, "local", run_id, launching=True)
    logdir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-logs-"))
    environ = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    procs, logs = {}, {}
    for task in (t for t in plan.tasks if only is None or t.name in only):
        task_env = cluster_file_env(plan, task, logdir) if cluster_file else plan.task_env(task)
        logs[task.name] = logdir / f"{task.name}.log"
        with logs[task.name].open("w") as out:
            procs[task.name] = subprocess.Popen(
                task.command,
                env={**environ, **TF_QUIET, **task_env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    return RunningCluster(plan, procs, logs)


def run_cluster(spec, run_id: str, timeout: float = 240, *, cluster_file: bool = False,
                only: set[str] | None = None) -> dict[str, TaskResult]:
    return start_cluster(spec, run_id, cluster_file=cluster_file, only=only).wait(timeout)


def describe(results: dict[str, TaskResult]) -> str:
    """Exit codes and output tails, for assertion messages."""
    return "\n".join(f"--- {n} rc={r.returncode}\n{r.output[-3000:]}" for n, r in results.items())
