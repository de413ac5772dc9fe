"""The stall watchdog and stragglers on Kubernetes: what the pods' events mean for them. Pure, no client.

Contract: ``clock`` rebuilds the lead pod's ``StallClock`` from its start and its events' own times (no
memory between rounds); ``StallRecord`` is what a round writes in the run's ConfigMap (``STALL_KEY``) about a
suspected or found stall; ``rules`` builds a run's ``Rules`` from its Jobs; ``step_times`` keeps a task's
``step_time`` events for ``launcher.supervision.stragglers``. Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from launcher.backends.kubernetes.status import Obj, job_role
from launcher.plan import naming
from launcher.plan.policy import JobPolicy
from launcher.protocol.events import Event, StepTime
from launcher.protocol.roles import TaskRef
from launcher.spec.models import RoleType
from launcher.supervision.rules import Rules
from launcher.supervision.stall import StallClock, after_event
from launcher.supervision.status import StallStatus
from launcher.supervision.stragglers import WINDOW, StepBreakdown

#: The run's ConfigMap key holding the last ``StallRecord``.
STALL_KEY = "stall.json"


class StallRecord(BaseModel):
    """The watchdog's view of a run as the watch left it: the stall status, and the lead pod it acted on."""

    pod: str = ""
    status: StallStatus


def clock(started: float, events: Iterable[Event], reporting: bool, looked_at: float | None = None) -> StallClock:
    """The stall clock of one pod of the lead: from its start, over its events in order of their times; with
    ``looked_at`` when the watch last read its stacks, if that was in the silence the events end in."""
    result = StallClock(started, reporting=reporting)
    for event in sorted(events, key=lambda e: e.time):
        result = after_event(result, event.event, event.time)
    return result.looked(looked_at) if looked_at is not None and looked_at >= result.since else result


@dataclass(frozen=True)
class _Member:
    """A task of a run as its Jobs show it (``launcher.supervision.rules.Member``)."""

    name: str
    type: RoleType
    index: int

    @property
    def ref(self) -> TaskRef:
        return TaskRef(self.type, self.index)


def rules(policy: JobPolicy, jobs: list[Obj], cluster: str) -> Rules:
    """The run's ``Rules`` from its Jobs: a task per index of each Job."""
    return Rules(policy, tuple(_Member(naming.task_name(cluster, job_role(job), index), job_role(job), index)
                               for job in jobs for index in range(job["spec"].get("completions", 1))))


def step_times(events: Iterable[Event]) -> list[StepBreakdown]:
    """A task's last ``step_time`` reports, for ``launcher.supervision.stragglers``."""
    return [StepBreakdown.of(e) for e in events if isinstance(e, StepTime)][-WINDOW:]
