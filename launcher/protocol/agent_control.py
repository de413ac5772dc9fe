"""What a Kubernetes task's agent (``launcher.worker.agent``) is asked on its endpoint, and what it says in its log.

Contract: a request is one JSON line (``Request``, at most ``endpoint_wire.MAX_REQUEST_BYTES``) that carries the
run's event token; a line that is not one of these models, or carries another token, gets nothing. ``stacks`` is
answered with the program's stacks (``launcher.protocol.stack_endpoint``); every other kind with one JSON
``AgentState`` (then the connection closes):

- ``status``: the state as it is;
- ``stop``: the program's current run ended (SIGTERM, then SIGKILL once ``grace_seconds`` passed: a preempted
  run still saves), answered once it ended;
- ``start``: a fresh run of the program (in the agent's standby when it holds one: TensorFlow already imported),
  answered once it began; refused (``started`` False) while a run is under way;
- ``quit``: the agent ends, with its last run's exit code, once no run is under way (``launcher.backends.
  kubernetes.runtime``'s ``close``: the job ended); while one is, nothing happens.

Each run the agent starts has a number (1 for the first); when one ends the agent writes ``exit_line`` on its
stdout (the pod's log, which the supervisor follows), after everything the run wrote there: ``read_exit`` reads it
back for the run's token only.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

#: The agent's option naming its standby's command (a JSON list), which its next runs become.
STANDBY_OPTION = "--standby"
#: The agent's option naming the command of the zygote its standbys call (a JSON list; its channel's fd follows):
#: the plan gives it with a standby of the entrypoint (``launcher.plan.targets.zygote_command``).
ZYGOTE_OPTION = "--zygote"
#: The marker of the agent's line in the pod's log, before the run's token.
EXIT_MARKER = "TFCLUSTER_AGENT_EXIT"
#: The longest grace a ``stop`` may ask for, in seconds (a day).
MAX_GRACE_SECONDS = 86_400.0


class RequestKind(str, Enum):
    STACKS = "stacks"
    STATUS = "status"
    STOP = "stop"
    START = "start"
    QUIT = "quit"


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    token: Annotated[str, Field(max_length=128)]


class Stacks(_Request):
    kind: Literal[RequestKind.STACKS] = RequestKind.STACKS


class Status(_Request):
    kind: Literal[RequestKind.STATUS] = RequestKind.STATUS


class Stop(_Request):
    kind: Literal[RequestKind.STOP] = RequestKind.STOP
    grace_seconds: Annotated[float, Field(ge=0, le=MAX_GRACE_SECONDS)]


class Start(_Request):
    kind: Literal[RequestKind.START] = RequestKind.START


class Quit(_Request):
    kind: Literal[RequestKind.QUIT] = RequestKind.QUIT


Request = Annotated[Stacks | Status | Stop | Start | Quit, Field(discriminator="kind")]
_REQUEST: TypeAdapter[Stacks | Status | Stop | Start | Quit] = TypeAdapter(Request)


class AgentState(BaseModel):
    """The agent's answer: its current (or last) run's number (0: none yet), that run's exit code once it ended
    (128+N for signal N), whether the kernel's OOM killer struck while it ran, and whether this request started it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    run: Annotated[int, Field(ge=0)]
    exit_code: int | None = None
    oom_killed: bool = False
    started: bool = False

    @property
    def running(self) -> bool:
        return self.run > 0 and self.exit_code is None


def encode(request: Stacks | Status | Stop | Start | Quit) -> bytes:
    return request.model_dump_json().encode() + b"\n"


def decode(line: bytes) -> Stacks | Status | Stop | Start | Quit | None:
    """The request on ``line`` (without its newline), or None if it is none."""
    try:
        return _REQUEST.validate_json(line)
    except ValidationError:
        return None


def state_of(answer: bytes) -> AgentState | None:
    try:
        return AgentState.model_validate_json(answer)
    except ValidationError:
        return None


def exit_line(token: str, state: AgentState) -> str:
    """The line the agent writes once a run ended (``state`` has its exit code)."""
    return f"{EXIT_MARKER}/{token} {state.model_dump_json()}"


def read_exit(line: str, token: str) -> AgentState | None:
    """The ended run ``line`` reports, if it is the agent's line for the run's ``token``; else None."""
    prefix = f"{EXIT_MARKER}/{token} "
    if not token or not line.startswith(prefix):
        return None
    state = state_of(line[len(prefix):].strip().encode())
    return state if state is not None and state.exit_code is not None else None
