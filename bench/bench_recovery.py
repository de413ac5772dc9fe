"""Recovery time (not run in CI): python bench/bench_recovery.py [--backend local|compose] [--repeat N] [--kill-at-step S]

``kill -9`` of an MWMS worker mid-training (local: its process group;
compose: ``docker kill`` of its container) until the chief's first step
after the supervisor's gang restart and the restore, against the time to
the first step of a fresh ``tfcluster up`` measured in the same run, as a
ratio table of the medians of ``--repeat`` runs: restarts that become the
tasks' standbys (``restart.warm``, the default: TensorFlow already
imported; on compose, standby containers) and restarts that start every
task afresh (``warm: false``). The kill comes at step ``--kill-at-step`` (default 300, about 20 s into
training): standbys start at the first step and import at idle priority,
which on this machine's two cores, both busy training, takes them about
16 s; a failure before that finds them still importing (they then finish
at the normal priority), so it saves less (``--kill-at-step 100``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_local_startup import CLI, SPEC, launch_with_tfcluster, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from launcher.backends.local.state import LocalState  # noqa: E402

#: ``restart.warm`` and how the table names its runs.
KINDS = ((True, "standbys"), (False, "afresh"))


def recover_once(workdir: Path, warm: bool, kill_at_step: int, backend: str) -> tuple[float, float, float]:
    """(fresh launch to first step, kill to restored, kill to first step after the restore), in seconds."""
    name = SPEC["name"]
    fresh, chief = launch_with_tfcluster(workdir, {**SPEC, "restart": {"warm": warm}}, backend)
    try:
        wait_event(chief, "step", min_step=kill_at_step)
        killed = time.time()
        kill_worker(name, backend)
        restored = wait_event(chief, "restored", after=killed)
        resumed = wait_event(chief, "step", after=restored["time"])
    finally:
        subprocess.run([*CLI, "down", "--volumes", "-b", backend, name], check=True, capture_output=True)
    return fresh, restored["time"] - killed, resumed["time"] - killed


def kill_worker(name: str, backend: str) -> None:
    """SIGKILL to worker 1: its process group's leader (local), its container (compose)."""
    worker = f"{name}-worker-1"
    if backend == "local":
        os.kill(LocalState.named(name).read_groups()[worker], signal.SIGKILL)
    else:
        from launcher.backends.images import docker_client

        docker_client().containers.get(worker).kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (median)")
    parser.add_argument("--kill-at-step", type=int, default=300, help="the step after which the worker is killed")
    parser.add_argument("--backend", choices=("local", "compose"), default="local")
    options = parser.parse_args()
    runs: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for run in range(options.repeat):
            for warm in (True, False) if run % 2 == 0 else (False, True):
                workdir = Path(tmp) / f"run{run}-{'warm' if warm else 'cold'}"
                workdir.mkdir()
                runs[warm].append(recover_once(workdir, warm, options.kill_at_step, options.backend))
    for warm, kind in KINDS:
        print(f"runs {kind} (fresh, restored, resumed):",
              "; ".join(", ".join(f"{t:.2f}" for t in r) for r in runs[warm]))
    fresh = statistics.median(r[0] for r in runs[True] + runs[False])
    rows = []
    for warm, kind in KINDS:
        restored, resumed = (statistics.median(r[i] for r in runs[warm]) for i in (1, 2))
        rows += [(f"kill to restored event ({kind})", restored), (f"kill to first step after restore ({kind})", resumed)]
    print_table(f"kill -9 of a worker to the next training step (MWMS chief + 2 workers, {options.backend}; medians of "
                f"{options.repeat}; kill after step {options.kill_at_step})", ("fresh launch to first step", fresh), rows)


if __name__ == "__main__":
    main()
