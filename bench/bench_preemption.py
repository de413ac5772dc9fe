"""Work lost per preemption, in steps (not run in CI): python bench/bench_preemption.py

MWMS chief + 2 workers on the local backend with the default backup
interval (every 100 steps), stopped mid-training once each way:

- without the notice: ``kill -9`` of a worker (what a SIGTERM that is
  swallowed becomes after the grace period): training resumes from the
  last backup;
- with the notice: SIGTERM to a worker: every task saves at the same step
  and the group restarts from there.

Lost = the chief's last step before the signal minus the step training
resumed at (the first step after it, minus one; 4 steps per epoch, so
the chief reports every step). 0 means nothing was trained twice.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_local_startup import SPEC, launch_with_tfcluster, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from launcher.backends.local.backend import LocalBackend  # noqa: E402
from launcher.backends.local.state import LocalState  # noqa: E402
from launcher.protocol.events import EventReader  # noqa: E402

PREEMPTED_SPEC = {**SPEC, "training": {**SPEC["training"], "epochs": 20, "steps_per_epoch": 4},
                  "checkpoint": {"backup_every_steps": 100}}
STOP_AT_STEP = 30


def steps_lost(sig: signal.Signals) -> int:
    name = PREEMPTED_SPEC["name"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        _, chief = launch_with_tfcluster(Path(tmp), PREEMPTED_SPEC)
        wait_event(chief, "step", min_step=STOP_AT_STEP)
        signalled = time.time()
        os.kill(LocalState.named(name).read_groups()[f"{name}-worker-1"], sig)
        resumed = wait_event(chief, "started", after=signalled)
        first = wait_event(chief, "step", after=resumed["time"])
        events = list(filter(None, map(EventReader(chief.token).parse, chief.lines())))
        before = max(e.step for e in events if e.event == "step" and e.time <= signalled)
        LocalBackend().cancel(name, volumes=True)
    return max(before - (first["step"] - 1), 0)


def main() -> None:
    without = steps_lost(signal.SIGKILL)
    with_notice = steps_lost(signal.SIGTERM)
    # The ratio needs a non-zero baseline; a lost count of 0 shows as ratio 0.
    print_table(f"work lost per preemption at step >= {STOP_AT_STEP} (MWMS chief + 2 workers, local, backup every 100 steps)",
                ("without the notice (kill -9)", float(max(without, 1))),
                [("with the notice (SIGTERM, coordinated save)", float(with_notice))], unit=" steps")
    print(f"(steps lost: without {without}, with {with_notice})")


if __name__ == "__main__":
    main()
