"""The files of one local cluster: the shared supervisor's ``StateDir`` plus task logs and process groups.

Contract: ``logs/<task>.log`` holds a task's stdout and stderr across its
runs (kept after the job ends, removed by ``cancel``); ``groups.json`` maps
each running task to its process group id, so ``down`` can kill them even
when the supervisor is gone.
"""

from __future__ import annotations

from pathlib import Path

from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.statefile import read_json, write_json


class LocalState(StateDir):
    def __init__(self, root: Path):
        super().__init__(root)
        self.logs = root / "logs"
        self.groups = root / "groups.json"

    @classmethod
    def of(cls, backend: BackendKind, name: str) -> LocalState:
        return cls(StateDir.of(backend, name).root)

    @classmethod
    def named(cls, name: str) -> LocalState:
        return cls.of(BackendKind.LOCAL, name)

    def task_log(self, task: str) -> Path:
        return self.logs / f"{task}.log"

    def read_groups(self) -> dict[str, int]:
        return read_json(self.groups) or {}

    def write_groups(self, groups: dict[str, int]) -> None:
        write_json(self.groups, groups)
