"""A local backend whose supervisor process gets a ``Notice`` (SIGUSR1), as Slurm's does: the harness's notice path
on real processes without Slurm. ``python -m helpers.noticed_backend DIR`` (``PROCESS``): not in the backend registry,
it is its own supervisor program.

What its ``then`` does is read from files the test puts in the state dir: ``refuse`` makes it raise (the job
cannot be handed back); otherwise it writes ``handed-back``. ``cannot`` makes ``host`` refuse to run the job.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import replace

from launcher.backends.local.backend import LocalBackend
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.supervision import harness
from launcher.supervision.status import JobStatus, State

HANDED_BACK = "handed-back"


class NoticedBackend(LocalBackend):
    @classmethod
    def host(cls, plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
        if (state.root / "cannot").exists():
            raise harness.CannotRun("no room", JobStatus(plan.name, plan.backend, State.RESTARTING, preemptions=3))

        def then() -> None:
            if (state.root / "refuse").exists():
                raise LaunchError("the queue refused")
            (state.root / HANDED_BACK).write_text("")

        notice = harness.Notice(signal.SIGUSR1, message="handed back: runs again later", said="noticed: handing back",
                                then=then, failed="every task saved, but it could not be handed back")
        return replace(super().host(plan, state, adopt), notice=notice)


#: Its supervisor process, as ``harness.start`` starts it.
PROCESS = harness.Process([sys.executable, "-m", "helpers.noticed_backend"], NoticedBackend.host, NoticedBackend.state_of)

if __name__ == "__main__":
    sys.exit(harness.run_supervisor(NoticedBackend.state_of(sys.argv[1]), NoticedBackend.host,
                                    adopt=harness.ADOPT_FLAG in sys.argv[2:]))
