"""``python -m launcher.backends.local.supervise DIR``: the local cluster's detached supervisor.

Runs the shared harness (``launcher.supervision.harness.serve``) with local
processes as the runtime, logging to ``LocalState.logs`` and recording the
task process groups in ``LocalState.groups``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from launcher.backends.local.processes import ProcessRuntime
from launcher.backends.local.state import LocalState
from launcher.plan.planner import Plan
from launcher.supervision import harness


def runtime(plan: Plan, state: harness.StateDir) -> ProcessRuntime:
    local = LocalState(state.root)
    return ProcessRuntime(plan, local.logs, on_groups=local.write_groups)


if __name__ == "__main__":
    sys.exit(harness.serve(Path(sys.argv[1]), runtime))
