"""Everything one task knows about itself, gathered once by ``launcher.worker.main``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.protocol.runconfig import RunConfig
from launcher.worker.reporter import Reporter
from launcher.worker.selection import Selection
from launcher.worker.usercode import UserCode


@dataclass(frozen=True)
class TaskContext:
    task_name: str
    run_config: RunConfig
    tf_config: dict[str, Any]
    selection: Selection
    user: UserCode
    reporter: Reporter
