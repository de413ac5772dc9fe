"""The local cluster's part of the supervisor process (``launcher.supervision.harness``).

Contract: ``host`` gives the harness local processes as the runtime, logging to
``LocalState.logs``, recording the task runs in ``LocalState.groups`` and their
exit codes in ``LocalState.exits``; adopting, it takes over the recorded runs.
"""

from __future__ import annotations

from launcher.backends.local.processes import ProcessRuntime
from launcher.backends.local.state import LocalState
from launcher.plan.planner import Plan
from launcher.supervision import harness


def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
    local = LocalState(state.root)
    runtime = ProcessRuntime(plan, local.logs, local.exits, on_runs=local.write_runs, recorded=local.read_runs())
    return harness.Hosted(plan, runtime)
