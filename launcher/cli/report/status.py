"""The part of a run's status document that the report draws, typed (pure).

Contract: ``ReportStatus.of(name, document)`` validates what the page shows of ``status -o json``
(``JobStatus.to_dict``): counts are non-negative ints, times and seconds finite floats, states ``State``
values, texts strings (which the page escapes where it writes them); keys it does not read are ignored.
A document that is not that (a state file or, on Kubernetes, a ConfigMap someone edited: whoever may write
it is not whoever opens the page) is a ``LaunchError`` of one line naming the first wrong field, and no
page is written: the report draws no value it has not typed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from launcher.errors import LaunchError
from launcher.supervision.status import State

Count = Annotated[StrictInt, Field(ge=0)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TaskRecord(_Record):
    """A task of the status: the page marks a failed one's exit."""

    name: StrictStr
    state: State
    exit_code: StrictInt | None = None


class StallRecord(_Record):
    stalls: Count = 0


class GoodputRecord(_Record):
    """``status -o json``'s ``goodput`` (``launcher.supervision.goodput.Goodput``)."""

    wall_seconds: Finite
    productive_seconds: Finite
    fraction: Finite
    lost_seconds: dict[StrictStr, Finite] = {}
    recomputed_steps: Count = 0


class ReportStatus(_Record):
    state: State = State.UNKNOWN
    message: StrictStr = ""
    restarts: Count = 0
    preemptions: Count = 0
    started_at: Finite | None = None
    tasks: list[TaskRecord] = []
    stall: StallRecord | None = None
    goodput: GoodputRecord | None = None

    @classmethod
    def of(cls, name: str, document: dict[str, Any]) -> ReportStatus:
        """Run ``name``'s status ``document``, typed; ``LaunchError`` (one line) when it is not one."""
        try:
            return cls.model_validate(document)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "the document"
            raise LaunchError(f"the status of {name!r} is not one tfcluster writes ({field}: {first['msg']}; "
                              f"{exc.error_count()} problem(s) in all): no report drawn") from None
