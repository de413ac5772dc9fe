"""Where a run's record is kept: the plan, the status its supervisor published, a stall's stacks.

Contract: a ``RunStore`` is what outlives the supervisor process and what ``status``, adoption and ``report`` read:
``read_plan`` (the plan the supervisor runs), ``read_status`` (the last status published, None before the first),
``write_status`` (publish one; a write that fails raises, and ``Publisher`` writes again later) and
``keep_stacks(number, dumps)`` (a stall's stacks; where to read them, None where they were not kept).
``RunFiles(root)`` keeps it in files of the run's state dir (local, compose, Slurm): ``plan.json``, ``status.json``
and ``stacks/stall-<number>/``; Kubernetes keeps it in the run's ConfigMap
(``launcher.backends.kubernetes.cluster_state.ConfigMapStore``). The supervisor process's own files (pid, log) are
not the record: ``launcher.supervision.harness.StateDir``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from launcher.plan.planner import Plan
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.statefile import read_json, read_private, write_json, write_private
from launcher.supervision.status import JobStatus


class RunStore(Protocol):
    """See the module contract."""

    def read_plan(self) -> Plan: ...

    def read_status(self) -> JobStatus | None: ...

    def write_status(self, status: JobStatus) -> None: ...

    def keep_stacks(self, number: int, dumps: Mapping[str, str | None]) -> str | None: ...


class RunFiles:
    """A ``RunStore`` in files under ``root`` (see the module contract); owner-only, as every state file."""

    def __init__(self, root: Path):
        self.plan = root / "plan.json"
        self.status = root / "status.json"
        self.stacks = root / "stacks"

    def exists(self) -> bool:
        return self.plan.exists()

    def write_plan(self, plan: Plan) -> None:
        write_private(self.plan, plan.model_dump_json())

    def read_plan(self) -> Plan:
        return Plan.model_validate_json(read_private(self.plan))

    def read_status(self) -> JobStatus | None:
        data = read_json(self.status)
        return None if data is None else JobStatus.from_dict(data)

    def write_status(self, status: JobStatus) -> None:
        write_json(self.status, status.to_dict())

    def keep_stacks(self, number: int, dumps: Mapping[str, str | None]) -> str | None:
        """Each task's dump under ``stacks/stall-<number>/``; that directory."""
        return write_stacks(self.stacks, number, dumps)
