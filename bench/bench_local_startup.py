"""Local backend launch overhead (not run in CI): python bench/bench_local_startup.py [--repeat N]

Time from launch to the chief's first training step of a demo-sized MWMS
cluster (chief + 2 workers), ``tfcluster up --detach`` vs starting the
same planned processes by hand (``Popen`` with each task's env), as a ratio
table of the medians of ``--repeat`` runs of each, measured in one run, the
two alternating (which goes first alternates too, so neither always finds
the page cache warmer). The helpers here are shared with
``bench_recovery.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))

from common import print_table  # noqa: E402

from launcher import api  # noqa: E402
from launcher.api import validate_data  # noqa: E402
from launcher.backends.interface import BackendOptions  # noqa: E402
from launcher.backends.local.backend import LocalBackend  # noqa: E402
from launcher.backends.local.state import LocalState  # noqa: E402
from launcher.plan.targets import BackendKind  # noqa: E402
from launcher.protocol.events import EventReader  # noqa: E402
from launcher.supervision.harness import StateDir  # noqa: E402

CLI = [sys.executable, "-m", "launcher"]
SPEC: dict[str, Any] = {
    "name": "bench",
    "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
    "training": {"epochs": 20, "steps_per_epoch": 20, "batch_size_per_replica": 32},
    "checkpoint": {"backup_every_steps": 5},
    "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
}


@dataclass(frozen=True)
class TaskLog:
    """A task's output (its log file, or what returns its lines) and its run's event token (``Plan.event_token``)."""

    source: Path | Callable[[], list[str]]
    token: str

    def lines(self) -> list[str]:
        if callable(self.source):
            return self.source()
        return self.source.read_text(errors="replace").splitlines() if self.source.exists() else []


def wait_event(log: TaskLog, kind: str, after: float = 0.0, timeout: float = 300.0, min_step: int = 0) -> dict[str, Any]:
    """The first ``kind`` event in ``log`` stamped after ``after`` and at ``min_step`` or later."""
    ends = time.monotonic() + timeout
    reader = EventReader(log.token)
    while time.monotonic() < ends:
        for event in filter(None, map(reader.parse, log.lines())):
            found = event.model_dump(mode="json")  # events are typed; the benches read their fields by name
            late = int(found.get("step") or 0) >= min_step
            if found["event"] == kind and found["time"] > after and late:
                return found
        time.sleep(0.1)
    raise TimeoutError(f"no {kind} event in {log.source} within {timeout} s")


def chief_log(name: str, backend: str) -> TaskLog:
    """The chief's output: its log file (local, Slurm), or what ``tfcluster logs`` reads (compose: its containers)."""
    chief = f"{name}-chief-0"
    token = StateDir.of(BackendKind(backend), name).record.read_plan().event_token
    if backend == "local":
        return TaskLog(LocalState.named(name).task_log(chief), token)
    if backend == "slurm":
        from launcher.backends.slurm.state import SlurmState

        return TaskLog(SlurmState.named(name).task_log(chief), token)
    from launcher.backends.compose.backend import ComposeBackend

    compose = ComposeBackend.create(BackendOptions())
    return TaskLog(lambda: list(compose.logs(name, chief)), token)


def launch_with_tfcluster(workdir: Path, spec: dict[str, Any], backend: str = "local") -> tuple[float, TaskLog]:
    """Seconds from ``up --detach`` to the chief's first step, and the chief's log; the cluster is still running."""
    path = workdir / "spec.json"
    path.write_text(json.dumps(spec))
    start = time.time()
    subprocess.run([*CLI, "up", "--detach", "-b", backend, str(path)], cwd=workdir, check=True, capture_output=True)
    chief = chief_log(spec["name"], backend)
    return wait_event(chief, "step", after=start)["time"] - start, chief


def launch_by_hand(workdir: Path, spec: dict[str, Any]) -> float:
    """Seconds from starting the planned processes directly to the chief's first step."""
    checkpoint = {**spec["checkpoint"], "dir": str(workdir / "by-hand")}
    plan = api.plan(validate_data({**spec, "name": f"{spec['name']}-hand", "checkpoint": checkpoint}), "local",
                    launching=True)
    start = time.time()
    procs = []
    for task in plan.tasks:
        with open(workdir / f"{task.name}.log", "wb") as log:
            procs.append(subprocess.Popen(task.command, env={**os.environ, **plan.task_env(task)}, cwd=workdir,
                                          stdout=log, stderr=subprocess.STDOUT))
    try:
        return wait_event(TaskLog(workdir / f"{plan.tasks[0].name}.log", plan.event_token), "step", after=start)["time"] - start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (median)")
    repeat = parser.parse_args().repeat
    hand: list[float] = []
    tool: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for run in range(repeat):
            workdir = Path(tmp) / f"run{run}"
            workdir.mkdir()
            for first in ([hand, tool] if run % 2 == 0 else [tool, hand]):
                if first is hand:
                    hand.append(launch_by_hand(workdir, SPEC))
                else:
                    tool.append(launch_with_tfcluster(workdir, SPEC)[0])
                    LocalBackend().cancel(SPEC["name"], volumes=True)
    print(f"runs: by hand {', '.join(f'{t:.2f}' for t in hand)}; tfcluster {', '.join(f'{t:.2f}' for t in tool)}")
    print_table(f"launch to first training step (MWMS chief + 2 workers, local; medians of {repeat})",
                ("processes started by hand", statistics.median(hand)),
                [("tfcluster up --detach", statistics.median(tool))])


if __name__ == "__main__":
    main()
