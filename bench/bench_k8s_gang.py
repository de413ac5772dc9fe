"""Gang placement on a real cluster (eval "$(bash .ci/k8s.sh)" first): python bench/bench_k8s_gang.py [--repeat N]

What all-or-nothing placement (``kubernetes.gang``: a PodGroup, Kubernetes' gang scheduling) costs at the start:
``tfcluster up -b k8s -d`` until every task pod of the run is Running (its container started), for a run of 3 and
one of 16 tasks, each with ``kubernetes.gang: on`` and ``off`` (the baseline, measured in the same round; which
goes first alternates), medians of ``--repeat`` rounds. The tasks are tiny programs that run until stopped (the
worker image's Python, no TensorFlow): what is measured is placement and container start, not training. Each run's
supervisor runs on this machine (``kubernetes.supervisor: false``), the same for both, so that the bench runs with
this tree's tfcluster whatever the cluster's image holds (a supervisor pod of an image older than
``kubernetes.gang`` cannot read a spec that sets it). The runs
share one claim made for the bench (``helpers.k8s_e2e.SharedClaim``: the cluster's local volumes are a fixed pool),
are named ``<prefix>-<tasks>-<gang>-<round>`` and taken down (``down --volumes``), whatever happened, each gone
before the next starts.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).parent)]

from bench_local_startup import CLI  # noqa: E402
from common import print_table  # noqa: E402

from helpers import k8s_e2e  # noqa: E402
from helpers.gates import BLOCK  # noqa: E402
from launcher.plan import naming  # noqa: E402

#: How long one start or teardown may take before the bench gives up.
TIMEOUT = 600.0
SIZES = (3, 16)


def spec(name: str, tasks: int, gang: str, claim: str) -> dict[str, Any]:
    return {"name": name, "image": k8s_e2e.image(),
            "roles": {"chief": {"command": ["python", "-c", BLOCK], "resources": {"memory": "96Mi"}},
                      "worker": {"replicas": tasks - 1, "command": ["python", "-c", BLOCK],
                                 "resources": {"memory": "96Mi"}}},
            "kubernetes": {"namespace": k8s_e2e.namespace(), "volume_claim": {"name": claim}, "gang": gang,
                           "supervisor": False}}


def all_running(core: Any, name: str, tasks: int) -> bool:
    pods = core.list_namespaced_pod(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}").items
    return sum(1 for p in pods if any(s.state.running for s in p.status.container_statuses or [])) >= tasks


def start_once(core: Any, workdir: Path, name: str, tasks: int, gang: str, claim: str) -> float:
    """Seconds from ``up -d`` until all ``tasks`` pods run; the run is then taken down and gone."""
    (workdir / f"{name}.json").write_text(json.dumps(spec(name, tasks, gang, claim)))
    start = time.monotonic()
    try:
        subprocess.run([*CLI, "up", "-b", "k8s", "-d", f"{name}.json"], cwd=workdir, check=True, capture_output=True,
                       timeout=TIMEOUT)
        while not all_running(core, name, tasks):
            if time.monotonic() - start > TIMEOUT:
                raise SystemExit(f"{name}: not all {tasks} pods running after {TIMEOUT:.0f} s")
            time.sleep(0.2)
        return time.monotonic() - start
    finally:
        subprocess.run([*CLI, "down", name, "--volumes"], cwd=workdir, check=True, capture_output=True, timeout=TIMEOUT)
        ends = time.monotonic() + TIMEOUT
        while k8s_e2e.left_of(name, core):
            if time.monotonic() >= ends:
                raise SystemExit(f"{name}: still there after {TIMEOUT:.0f} s")
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (median)")
    parser.add_argument("--prefix", default=f"bench-{secrets.token_hex(2)}", help="the runs' names start with it")
    options = parser.parse_args()
    k8s_e2e.from_kubeconfig_env()
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=k8s_e2e.kubeconfig()))
    times: dict[tuple[int, str], list[float]] = {(tasks, gang): [] for tasks in SIZES for gang in ("off", "on")}
    claim = k8s_e2e.SharedClaim()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
            for run in range(options.repeat):
                for tasks in SIZES:
                    for gang in (("off", "on") if run % 2 == 0 else ("on", "off")):
                        name = f"{options.prefix}-{tasks}-{gang}-{run}"
                        times[tasks, gang].append(start_once(core, Path(tmp), name, tasks, gang, claim.name()))
    finally:
        claim.delete()
    for (tasks, gang), measured in times.items():
        print(f"runs: {tasks} tasks, gang {gang}: {', '.join(f'{t:.2f}' for t in measured)}")
    for tasks in SIZES:
        print_table(f"up -b k8s -d to all {tasks} task pods running (real one-node Kubernetes; medians of "
                    f"{options.repeat})", ("kubernetes.gang: off (each pod placed alone)",
                                           statistics.median(times[tasks, "off"])),
                    [("kubernetes.gang: on (one PodGroup, all or nothing)", statistics.median(times[tasks, "on"]))])


if __name__ == "__main__":
    main()
