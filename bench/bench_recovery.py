"""Recovery time (not run in CI): python bench/bench_recovery.py [--backend local|compose|compose-container|slurm]
[--repeat N] [--early-seconds S] [--late-step N]

``kill -9`` of an MWMS worker mid-training (local: its process group;
compose: its program in its container, restarted in place; compose-container:
``docker kill`` of its container; Slurm, the three nodes of the
test cluster on this host: its training process) until the chief's first step
after the supervisor's gang restart and the restore, against the time to
the first step of a fresh ``tfcluster up`` measured in the same run, as a
ratio table of the medians of ``--repeat`` runs (each run's ratio to its
own fresh launch: this host's load drifts between runs): restarts that become the
tasks' standbys (``restart.warm``, the default: TensorFlow already
imported; on compose, standby containers; on Slurm, standby steps) and restarts that start every
task afresh (``warm: false``). Each kind is killed twice per repeat: early,
``--early-seconds`` after the chief's first step (default 6: a failure
early in a run, which found standbys that imported at idle priority still
importing; local standbys are now forked from one zygote's import, done
before the first runs, which it forks too), and late, after step
``--late-step`` (default 300, about 20 s into training).
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

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent / "tests")]

from bench_local_startup import CLI, SPEC, launch_with_tfcluster, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from helpers.task_kill import KILL_9_TASK  # noqa: E402
from launcher.backends.local.state import LocalState  # noqa: E402
from launcher.protocol import env  # noqa: E402

#: The compose runs whose kill is ``docker kill`` of the worker's container (its agent too: no restart in place).
COMPOSE_CONTAINER = "compose-container"
#: ``restart.warm`` and how the table names its runs.
KINDS = ((True, "standbys"), (False, "afresh"))


#: When the worker is killed: (seconds after the chief's first step, or None; at or after this step).
KillAt = tuple[float | None, int]


def recover_once(workdir: Path, warm: bool, kill_at: KillAt, backend: str) -> tuple[float, float, float]:
    """(fresh launch to first step, kill to restored, kill to first step after the restore), in seconds."""
    name, engine = SPEC["name"], "compose" if backend == COMPOSE_CONTAINER else backend
    fresh, chief = launch_with_tfcluster(workdir, {**SPEC, "restart": {"warm": warm}}, engine)
    try:
        after_first, min_step = kill_at
        first = wait_event(chief, "step", min_step=min_step)
        if after_first is not None:
            time.sleep(max(0.0, first["time"] + after_first - time.time()))  # a time to kill at, not a test's order
        killed = time.time()
        kill_worker(name, backend)
        restored = wait_event(chief, "restored", after=killed)
        resumed = wait_event(chief, "step", after=restored["time"])
        if warm:
            warmed = wait_event(chief, "warm_start", after=killed)
            print(f"  chief's standby: imported in {warmed['import_seconds']:.2f} s, then waited "
                  f"{warmed['waited_seconds']:.2f} s", file=sys.stderr)
    finally:
        subprocess.run([*CLI, "down", "--volumes", "-b", engine, name], check=True, capture_output=True)
    return fresh, restored["time"] - killed, resumed["time"] - killed


def kill_worker(name: str, backend: str) -> None:
    """SIGKILL to worker 1: its process group's leader (local), its training process in its container (compose: the
    program its agent's zygote forked, as a crash ends it: ``KILL_9_TASK``; ``compose-container``: the whole
    container, ``docker kill``), its training process (Slurm: the python process of the task that is not a waiting
    standby; every node is this host)."""
    worker = f"{name}-worker-1"
    if backend == "local":
        os.kill(LocalState.named(name).read_groups()[worker], signal.SIGKILL)
    elif backend == "slurm":
        os.kill(slurm_task_process(worker), signal.SIGKILL)
    else:
        from launcher.backends.image_build import docker_client

        container = docker_client().containers.get(worker)
        if backend == COMPOSE_CONTAINER:
            container.kill()
            return
        said = container.exec_run(["python", "-c", KILL_9_TASK]).output.decode().split()
        if said != ["killed"]:
            raise SystemExit(f"{worker}: its program was not killed: {said}")


def slurm_task_process(task: str) -> int:
    """The pid of ``task``'s first run on this host: its python process (srun is not python) that runs the
    entrypoint, not its standby's."""
    marker = f"{env.TASK_NAME}={task}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0") if proc.name.isdigit() else []
            argv = (proc / "cmdline").read_bytes().split(b"\0") if environ else []
        except OSError:
            continue
        if marker in environ and argv and os.path.basename(argv[0]).startswith(b"python"):
            found.append((b"launcher.worker.standby" in argv, int(proc.name)))
    return min(found)[1]  # the entrypoint's before a standby's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind and kill point (median)")
    parser.add_argument("--early-seconds", type=float, default=6.0, help="early kill: seconds after the first step")
    parser.add_argument("--late-step", type=int, default=300, help="late kill: after this step")
    parser.add_argument("--kinds", choices=("both", "standbys"), default="both",
                        help="standbys only skips the restarts afresh (half the time)")
    parser.add_argument("--backend", choices=("local", "compose", COMPOSE_CONTAINER, "slurm"), default="local",
                        help=f"{COMPOSE_CONTAINER}: compose, killing worker 1's whole container instead of its program")
    options = parser.parse_args()
    points: dict[str, KillAt] = {f"early, {options.early_seconds:g} s after the first step": (options.early_seconds, 0),
                                 f"late, after step {options.late_step}": (None, options.late_step)}
    kinds = KINDS if options.kinds == "both" else KINDS[:1]
    runs: dict[tuple[str, bool], list[tuple[float, float, float]]] = {(p, w): [] for p in points for w, _ in kinds}
    # Slurm: the submit dir must be on the filesystem every node shares (not /tmp): under this one
    with tempfile.TemporaryDirectory(dir=Path.cwd() if options.backend == "slurm" else None) as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for run in range(options.repeat):
            for point, kill_at in points.items() if run % 2 == 0 else reversed(points.items()):
                for warm, _ in kinds if run % 2 == 0 else reversed(kinds):
                    workdir = Path(tmp) / f"run{run}-{kill_at[1]}-{'warm' if warm else 'cold'}"
                    workdir.mkdir()
                    runs[point, warm].append(recover_once(workdir, warm, kill_at, options.backend))
    for (point, warm), done in runs.items():
        print(f"runs {dict(KINDS)[warm]}, {point} (fresh, restored, resumed):",
              "; ".join(", ".join(f"{t:.2f}" for t in r) for r in done))
    fresh = statistics.median(r[0] for done in runs.values() for r in done)
    rows, ratios = [], []
    for (point, warm), done in runs.items():
        kind = f"{dict(KINDS)[warm]}, {point}"
        for i, label in ((1, "kill to restored event"), (2, "kill to first step after restore")):
            rows.append((f"{label} ({kind})", statistics.median(r[i] for r in done)))
            ratios.append(statistics.median(r[i] / r[0] for r in done))  # against its own run's fresh launch
    print_table(f"kill -9 of a worker to the next training step (MWMS chief + 2 workers, {options.backend}; medians of "
                f"{options.repeat})", ("fresh launch to first step", fresh), rows, ratios=ratios)

if __name__ == "__main__":
    main()
