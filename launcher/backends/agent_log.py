"""A held agent's log as a container runtime follows it: the program's lines, and the agent's lines that say a run
ended (``launcher.worker.agent``; Kubernetes' pods and Compose's containers).

Contract: ``RunLog(token).put(line)`` keeps an agent's line for the run's ``token`` (``agent_control.read_exit``)
in ``ended``, by the agent's run number, and wakes the supervisor (a run that ended in place is seen now, not at
its next round); it hands any other line to ``lines`` (a ``LineQueue``) and returns what that ``put`` returned
(False: nothing more is wanted). The agent writes its line after everything the run wrote, so a run seen ended
has all its lines in ``lines``.
"""

from __future__ import annotations

from launcher.backends.lines import LineQueue
from launcher.protocol import agent_control
from launcher.supervision.harness import wake_supervisor


class RunLog:
    def __init__(self, token: str):
        self.token = token
        self.lines = LineQueue()
        self.ended: dict[int, agent_control.AgentState] = {}

    def put(self, line: str) -> bool:
        state = agent_control.read_exit(line, self.token)
        if state is None:
            return self.lines.put(line)
        self.ended[state.run] = state
        wake_supervisor()
        return True
