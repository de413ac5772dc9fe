"""Local recovery time (not run in CI): python bench/bench_recovery.py

``kill -9`` of an MWMS worker mid-training until the chief's first step
after the supervisor's gang restart and the restore, against the time to
the first step of a fresh ``tfcluster up`` measured in the same run, as a
ratio table (every task restarts and imports TensorFlow again, so recovery
costs about one warm start).
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

from launcher.backends.local.backend import LocalBackend
from launcher.backends.local.state import LocalState  # noqa: E402


def main() -> None:
    name = SPEC["name"]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        fresh, chief = launch_with_tfcluster(Path(tmp), SPEC)
        wait_event(chief, "step", min_step=12)
        killed = time.time()
        os.kill(LocalState.named(name).read_groups()[f"{name}-worker-1"], signal.SIGKILL)
        restored = wait_event(chief, "restored", after=killed)
        resumed = wait_event(chief, "step", after=restored["time"])
        LocalBackend().cancel(name, volumes=True)
    print_table("kill -9 of a worker to the next training step (MWMS chief + 2 workers, local)",
                ("fresh launch to first step", fresh),
                [("kill to restored event", restored["time"] - killed),
                 ("kill to first step after restore", resumed["time"] - killed)])


if __name__ == "__main__":
    main()
