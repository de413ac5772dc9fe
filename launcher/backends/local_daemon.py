"""The local backend's supervisor daemon: ``python -m launcher.backends.local_daemon DIR``.

Contract: forks once so the launching command returns at once and the
daemon is nobody's child; writes its pid to ``DIR/daemon.pid``; supervises
the plan in ``DIR/plan.json`` with ``launcher.supervisor`` and local
processes, rewriting ``DIR/state.json`` on every change; SIGTERM or SIGINT
cancels the job (every task is stopped) and the daemon exits. See
``launcher.backends.local`` for the directory layout.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from launcher.backends.local import ClusterDir
from launcher.backends.local_processes import ProcessRuntime
from launcher.state_files import write_json
from launcher.supervisor import Supervisor


def main(root: Path) -> None:
    files = ClusterDir(root)
    child = os.fork()
    if child > 0:
        files.daemon_pid.write_text(str(child))  # known before the launching command returns
        os._exit(0)
    plan = files.read_plan()
    supervisor = Supervisor(
        plan,
        ProcessRuntime(plan, files.logs, on_groups=lambda groups: write_json(files.groups, groups)),
        on_status=files.write_status,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: supervisor.cancel())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    supervisor.run()
    write_json(files.groups, {})  # every task is stopped: no group id left for `down` to kill later


if __name__ == "__main__":
    main(Path(sys.argv[1]))
