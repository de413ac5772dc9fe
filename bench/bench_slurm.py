"""Slurm backend launch overhead (needs a Slurm cluster, e.g. .ci/slurm.sh): python bench/bench_slurm.py [--repeat N]

Time from submission to the chief's first training step of a demo-sized
MWMS cluster (chief + 2 workers, one per node), ``tfcluster up -b slurm
--detach`` vs a hand-written ``sbatch`` script that starts the same tasks
(the same commands and environment, TF_CONFIG written out for the nodes)
as ``srun`` steps and waits for them, as a ratio measured in one run
(medians of ``--repeat`` runs each; goal: at most 1.15). Each launch starts
on an idle cluster: the job before it has ended (both ways wait for that).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).parent))

from bench_local_startup import CLI, SPEC, TaskLog, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from launcher import api  # noqa: E402
from launcher.api import validate_data  # noqa: E402
from launcher.backends.slurm import slurmctl  # noqa: E402
from launcher.backends.slurm.backend import SlurmBackend  # noqa: E402
from launcher.backends.slurm.placement import resolve  # noqa: E402
from launcher.backends.slurm.state import SlurmState  # noqa: E402


def launch_with_tfcluster(workdir: Path) -> float:
    path = workdir / "spec.json"
    path.write_text(api.validate_data(SPEC).model_dump_json())
    start = time.time()
    subprocess.run([*CLI, "up", "-b", "slurm", "--detach", str(path)], cwd=workdir, check=True, capture_output=True)
    state = SlurmState.named(SPEC["name"])
    chief = TaskLog(state.task_log(f"{SPEC['name']}-chief-0"), state.record.read_plan().event_token)
    try:
        return wait_event(chief, "step", after=start)["time"] - start
    finally:
        SlurmBackend().cancel(SPEC["name"], volumes=True)


def hand_script(workdir: Path) -> tuple[str, str]:
    """What a user would write: one srun step per task, its environment spelled out, on the first nodes; and the
    run's event token."""
    spec = {**SPEC, "name": f"{SPEC['name']}-hand", "checkpoint": {**SPEC["checkpoint"], "dir": "hand-checkpoints"}}
    plan = api.plan(validate_data(spec, "slurm"), "slurm")  # relative: under this run's directory
    nodes = slurmctl.allocation_nodes(slurmctl.run(["sinfo", "-h", "-o", "%N"]).strip())[: len(plan.tasks)]
    resolved, placement = resolve(plan, nodes, "0")  # the job's id is not known yet: the first port block
    lines = ["#!/bin/bash", f"#SBATCH --ntasks={len(plan.tasks)}", f"#SBATCH --nodelist={','.join(n.name for n in nodes)}",
             "#SBATCH --output=hand.log"]
    for task in resolved.tasks:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in resolved.task_env(task).items())
        command = " ".join(map(shlex.quote, task.command))
        lines.append(f"env {variables} srun --nodes=1 --ntasks=1 --nodelist={placement[task.name]} --overlap "
                     f"{command} > {shlex.quote(str(workdir / task.name))}.log 2>&1 &")
    return "\n".join([*lines, "wait", ""]), plan.event_token


def launch_by_hand(workdir: Path) -> float:
    script, token = hand_script(workdir)
    (workdir / "hand.sbatch").write_text(script)
    start = time.time()
    job = slurmctl.submit("hand.sbatch", cwd=str(workdir))
    try:
        return wait_event(TaskLog(workdir / f"{SPEC['name']}-hand-chief-0.log", token), "step", after=start)["time"] - start
    finally:
        slurmctl.cancel(job)
        await_end(job)


def await_end(job_id: str, timeout: float = 120.0) -> None:
    """Wait until Slurm has ended the job (its steps killed, nothing completing), as ``tfcluster down`` does:
    the next launch then starts on an idle cluster, not beside a job still being torn down."""
    ends = time.monotonic() + timeout
    while (job := slurmctl.job(job_id)) is not None and not job.ended:
        if time.monotonic() >= ends:
            raise TimeoutError(f"Slurm has not ended job {job_id} in {timeout:.0f} s")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    repeat = parser.parse_args().repeat
    hand, tool = [], []
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:  # the submit dir must be on the shared filesystem
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for run in range(repeat):
            workdir = Path(tmp) / f"run{run}"
            workdir.mkdir()
            os.chdir(workdir)
            hand.append(launch_by_hand(workdir))
            tool.append(launch_with_tfcluster(workdir))
    os.chdir(Path(tmp).parent)
    print_table("submission to first training step (MWMS chief + 2 workers, Slurm, one task per node)",
                ("hand-written sbatch + srun", statistics.median(hand)), [("tfcluster up -b slurm -d", statistics.median(tool))])


if __name__ == "__main__":
    main()
