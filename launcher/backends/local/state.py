"""The files of one local cluster: the shared supervisor's ``StateDir`` plus task logs, runs and exit codes.

Contract: ``logs/<task>.log`` holds a task's stdout and stderr across its
runs (kept after the job ends, removed by ``cancel``); ``groups.json`` maps
each running task to its current run (``{"pgid", "log_offset"}``), so
``down`` can kill the tasks and a new supervisor can adopt them when the
supervisor is gone; ``exits/<task>`` holds the exit code of the task's
current run once it ended (``launcher.backends.local.processes``).
"""

from __future__ import annotations

from pathlib import Path

from launcher.backends.local.processes import RunRecord
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.statefile import read_json, write_json


class LocalState(StateDir):
    def __init__(self, root: Path):
        super().__init__(root)
        self.logs = root / "logs"
        self.groups = root / "groups.json"
        self.exits = root / "exits"

    @classmethod
    def of(cls, backend: BackendKind, name: str) -> LocalState:
        return cls(StateDir.of(backend, name).root)

    @classmethod
    def named(cls, name: str) -> LocalState:
        return cls.of(BackendKind.LOCAL, name)

    def task_log(self, task: str) -> Path:
        return self.logs / f"{task}.log"

    def read_runs(self) -> dict[str, RunRecord]:
        data = read_json(self.groups)
        return {name: RunRecord(**run) for name, run in data.items()} if isinstance(data, dict) else {}

    def read_groups(self) -> dict[str, int]:
        """``{task: process group id}`` of the recorded runs."""
        return {name: run.pgid for name, run in self.read_runs().items()}

    def write_runs(self, runs: dict[str, RunRecord]) -> None:
        write_json(self.groups, {name: run.to_dict() for name, run in runs.items()})
