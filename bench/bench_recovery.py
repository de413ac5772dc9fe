"""Local recovery time (not run in CI): python bench/bench_recovery.py [--repeat N]

``kill -9`` of an MWMS worker mid-training until the chief's first step
after the supervisor's gang restart and the restore, against the time to
the first step of a fresh ``tfcluster up`` measured in the same run, as a
ratio table of the medians of ``--repeat`` runs (every task restarts and
imports TensorFlow again, so recovery costs about one warm start).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_local_startup import SPEC, launch_with_tfcluster, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from launcher.backends.local.backend import LocalBackend
from launcher.backends.local.state import LocalState  # noqa: E402


def recover_once(workdir: Path) -> tuple[float, float, float]:
    """(fresh launch to first step, kill to restored, kill to first step after the restore), in seconds."""
    name = SPEC["name"]
    fresh, chief = launch_with_tfcluster(workdir, SPEC)
    try:
        wait_event(chief, "step", min_step=12)
        killed = time.time()
        os.kill(LocalState.named(name).read_groups()[f"{name}-worker-1"], signal.SIGKILL)
        restored = wait_event(chief, "restored", after=killed)
        resumed = wait_event(chief, "step", after=restored["time"])
    finally:
        LocalBackend().cancel(name, volumes=True)
    return fresh, restored["time"] - killed, resumed["time"] - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs (median)")
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        runs = []
        for run in range(repeat):
            workdir = Path(tmp) / f"run{run}"
            workdir.mkdir()
            runs.append(recover_once(workdir))
    print("runs (fresh, restored, resumed):", "; ".join(", ".join(f"{t:.2f}" for t in r) for r in runs))
    fresh, restored, resumed = (statistics.median(column) for column in zip(*runs, strict=True))
    print_table(f"kill -9 of a worker to the next training step (MWMS chief + 2 workers, local; medians of {repeat})",
                ("fresh launch to first step", fresh),
                [("kill to restored event", restored), ("kill to first step after restore", resumed)])


if __name__ == "__main__":
    main()
