"""The one rule about roles that the controller and the task both apply: which task leads the job.

Contract: ``lead_task(roles)`` is the chief, or worker 0 when the cluster
has no chief. The lead writes checkpoints, the model and the DONE marker
(``launcher.worker.selection``); its events are the job's progress and,
under success policy ``chief``, its exit 0 ends the job
(``launcher.plan.policy``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from launcher.spec.models import RoleType


@dataclass(frozen=True)
class TaskRef:
    """One task of a cluster by role and index."""

    role: RoleType
    index: int


def lead_task(roles: Iterable[RoleType]) -> TaskRef:
    """The chief when ``roles`` has one, else worker 0."""
    return TaskRef(RoleType.CHIEF if RoleType.CHIEF in set(roles) else RoleType.WORKER, 0)
