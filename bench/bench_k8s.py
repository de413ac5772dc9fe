"""Kubernetes on a real cluster (eval "$(bash .ci/k8s.sh)" first): python bench/bench_k8s.py [--repeat N] [--prefix P]
[--kill-at-step S [S ...]] [--recovery-only]

A demo-sized MWMS cluster (chief + 2 workers) on the one-node cluster of
``.ci/k8s.sh`` (the ``KUBECONFIG`` it exports, the launcher's identity, its
namespace), two tables of ratios measured in one run, medians of
``--repeat`` rounds:

- launch: ``tfcluster up -b k8s -d`` until the chief's first training step,
  vs ``kubectl create -k`` of the manifests ``tfcluster render -b k8s`` wrote
  (rendered before the clock starts) until the same step, as the same user
  (which goes first alternates between rounds).
  ``kubectl apply -k`` is what docs/kubernetes.md shows, but it reads each
  object first (``get``), which the launcher's Role (k8s/rbac-launcher.yaml)
  does not grant on Jobs: as that user only ``create`` runs;
- recovery: ``kill -9`` of worker 1's training process through ``pods/exec``
  (``helpers.k8s_e2e.kill_9_task``, which spares the agent's standby) at each
  ``--kill-at-step`` (early and late), until the chief's first step after the
  gang's restore, vs that run's own launch to its first step (the ratio: the
  median of the rounds' own ratios); also when the old gang's last pod ended
  and the last replacement pod was created (the API's whole seconds; none of
  either when the group restarted in place) and how many pods were made. The
  run is launched attached (``tfcluster up -b k8s``, as a user watching it: its
  supervision loop runs) and stopped with Ctrl-C. ``--recovery-only`` skips
  the launch table. The image is ``helpers.k8s_e2e.image()``
  (``TFCLUSTER_E2E_IMAGE``): one without the held agent restarts by Job
  replacement, which measures that path with the same bench.

Each launch starts on an idle namespace: the run before it is gone, pods and
claim (each launch binds one of the storage class's local volumes; .ci/k8s.sh
offers released ones again: rerun it between runs of this bench). Runs are
named ``<prefix>-up<N>``, ``<prefix>-hand<N>``, ``<prefix>-kill<N>`` (default
prefix: ``bench-`` and a random suffix, so that two people's runs never meet)
and taken down, whatever happened.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).parent)]

from bench_local_startup import CLI, TaskLog, wait_event  # noqa: E402
from common import print_table  # noqa: E402

from helpers import k8s_e2e  # noqa: E402
from launcher import api  # noqa: E402
from launcher.api import validate_data  # noqa: E402
from launcher.backends.kubernetes import status as k8s_status  # noqa: E402
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions  # noqa: E402
from launcher.errors import LaunchError  # noqa: E402
from launcher.plan import naming  # noqa: E402
from launcher.spec.models import RoleType  # noqa: E402

#: Long enough for a kill at step 100 and the restore (400 steps take ~25 s on this host).
TRAINING = {"epochs": 40, "steps_per_epoch": 20, "batch_size_per_replica": 32}
#: How long a launch, a restore or a teardown may take before the bench gives up.
TIMEOUT = 600.0


def spec(name: str) -> dict[str, Any]:
    return {"name": name, "image": k8s_e2e.image(), "roles": {"chief": {}, "worker": {"replicas": 2}},
            "training": TRAINING, "checkpoint": {"backup_every_steps": 5}, "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
            "deadline_seconds": TIMEOUT,
            "kubernetes": {"namespace": k8s_e2e.namespace(), "volume_claim": {"size": "1Gi"}}}


class Cluster:
    """The real cluster as the launcher's user: the chief's log (its latest pod) and what is left of a run."""

    def __init__(self) -> None:
        from kubernetes import client, config

        self.core = client.CoreV1Api(config.new_client_from_config(config_file=k8s_e2e.kubeconfig()))
        self.batch = client.BatchV1Api(self.core.api_client)
        self.backend = KubernetesBackend.create(KubernetesOptions(namespace=k8s_e2e.namespace()))

    def chief(self, name: str, token: str) -> TaskLog:
        """The chief's output as ``tfcluster logs`` reads it (no lines before its pod runs)."""

        def lines() -> list[str]:
            try:
                return list(self.backend.logs(name, naming.task_name(name, RoleType.CHIEF, 0)))
            except LaunchError:  # no pod yet, or its container not started
                return []

        return TaskLog(lines, token)

    def token(self, name: str) -> str:
        """The event token the run's Jobs gave their pods (``up`` makes a fresh one)."""
        listed = self.batch.list_namespaced_job(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}",
                                                _preload_content=False)
        return k8s_status.event_token(json.loads(listed.data)["items"])

    def worker_pod(self, name: str) -> str:
        pods = self.core.list_namespaced_pod(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}").items
        return next(p.metadata.name for p in pods
                    if p.metadata.name.startswith(f"{name}-worker-1-") and p.status.phase == "Running")

    def gang_timeline(self, name: str, killed: float) -> tuple[float, float, int]:
        """Seconds from ``killed`` until the last pod of the old gang ended, and until the last replacement pod was
        created (the API's timestamps: whole seconds; NaN for none), and how many task pods were made after it."""
        pods = self.core.list_namespaced_pod(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_CLUSTER}={name}").items
        pods = [p for p in pods if not p.metadata.name.startswith(naming.supervisor_name(name))]
        old = [p for p in pods if p.metadata.creation_timestamp.timestamp() < killed]
        ended = [s.state.terminated.finished_at.timestamp() for p in old for s in p.status.container_statuses or []
                 if s.state.terminated is not None]
        created = [p.metadata.creation_timestamp.timestamp() for p in pods if p not in old]
        return (max(ended, default=float("nan")) - killed, max(created, default=float("nan")) - killed,
                len(created))

    def await_gone(self, name: str) -> None:
        """Until nothing of the run's labels is left (pods terminated, claim deleted)."""
        ends = time.monotonic() + TIMEOUT
        while left := k8s_e2e.left_of(name, self.core):
            if time.monotonic() >= ends:
                raise TimeoutError(f"{name}: still there after {TIMEOUT:.0f} s: {left}")
            time.sleep(1)


def cli(*args: str, cwd: Path) -> None:
    subprocess.run([*CLI, *args], cwd=cwd, check=True, capture_output=True, timeout=TIMEOUT)


def launch_with_tfcluster(cluster: Cluster, workdir: Path, name: str) -> float:
    (workdir / f"{name}.json").write_text(json.dumps(spec(name)))
    start = time.time()
    try:
        cli("up", "-b", "k8s", "-d", f"{name}.json", cwd=workdir)
        return wait_event(cluster.chief(name, cluster.token(name)), "step", after=start, timeout=TIMEOUT)["time"] - start
    finally:
        cli("down", name, "--volumes", cwd=workdir)
        cluster.await_gone(name)


def launch_by_hand(cluster: Cluster, workdir: Path, name: str) -> float:
    """``kubectl create -k`` of the rendered manifests (written before the clock starts), deleted with ``kubectl
    delete -k`` (not waiting: that watches Jobs, which the launcher's Role does not grant)."""
    (workdir / f"{name}.json").write_text(json.dumps(spec(name)))
    manifests = workdir.resolve() / name
    cli("render", "-b", "k8s", "-d", str(manifests), f"{name}.json", cwd=workdir)
    token = api.plan(validate_data(spec(name), "k8s"), "k8s").event_token  # the rendered run's ("manual")
    start = time.time()
    try:
        subprocess.run(["kubectl", "create", "-k", str(manifests)], check=True, capture_output=True, timeout=TIMEOUT)
        return wait_event(cluster.chief(name, token), "step", after=start, timeout=TIMEOUT)["time"] - start
    finally:
        subprocess.run(["kubectl", "delete", "-k", str(manifests), "--ignore-not-found", "--wait=false"], check=True,
                       capture_output=True, timeout=TIMEOUT)
        cluster.await_gone(name)


def recover_once(cluster: Cluster, workdir: Path, name: str, kill_at_step: int) -> tuple[float, ...]:
    """(launch to first step, kill to the old gang's end, to the last replacement pod's creation, to restored, to the
    first step after the restore), in seconds."""
    (workdir / f"{name}.json").write_text(json.dumps(spec(name)))
    start = time.time()
    with open(workdir / f"{name}.up.log", "wb") as out:
        up = subprocess.Popen([*CLI, "up", "-b", "k8s", f"{name}.json"], cwd=workdir, stdout=out,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        ends = time.monotonic() + TIMEOUT
        while not (token := cluster.token(name)):  # the Jobs are not there until `up` made them
            if up.poll() is not None or time.monotonic() >= ends:
                raise SystemExit(f"{name}: `up` made no Jobs; see {workdir / f'{name}.up.log'}")
            time.sleep(0.2)
        chief = cluster.chief(name, token)
        fresh = wait_event(chief, "step", after=start, timeout=TIMEOUT)["time"] - start
        wait_event(chief, "step", min_step=kill_at_step, timeout=TIMEOUT)
        victim = cluster.worker_pod(name)
        killed = time.time()
        code, stdout, stderr = k8s_e2e.kill_9_task(cluster.core, victim)
        if code != 0 or stdout.split() != ["killed"]:
            raise SystemExit(f"{name}: kill -9 in {victim} failed: {code} {stdout} {stderr}")
        restored = wait_event(chief, "restored", after=killed, timeout=TIMEOUT)
        resumed = wait_event(chief, "step", after=restored["time"], timeout=TIMEOUT)
        gang_ended, replaced, made = cluster.gang_timeline(name, killed)
    finally:
        up.send_signal(signal.SIGINT)  # Ctrl-C: `up` stops the tasks
        try:
            up.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            up.kill()
        cli("down", name, "--volumes", cwd=workdir)
        cluster.await_gone(name)
    return fresh, gang_ended, replaced, restored["time"] - killed, resumed["time"] - killed, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="rounds (median)")
    parser.add_argument("--kill-at-step", type=int, nargs="+", default=[100],
                        help="the steps after which worker 1 is killed (a recovery table for each)")
    parser.add_argument("--recovery-only", action="store_true", help="skip the launch table")
    parser.add_argument("--prefix", default=f"bench-{secrets.token_hex(2)}", help="the runs' names start with it")
    options = parser.parse_args()
    k8s_e2e.from_kubeconfig_env()
    cluster = Cluster()
    hand: list[float] = []
    tool: list[float] = []
    recoveries: dict[int, list[tuple[float, ...]]] = {step: [] for step in options.kill_at_step}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        workdir = Path(tmp)
        for run in range(options.repeat):
            for first in ([] if options.recovery_only else [hand, tool] if run % 2 == 0 else [tool, hand]):
                if first is hand:
                    hand.append(launch_by_hand(cluster, workdir, f"{options.prefix}-hand{run}"))
                else:
                    tool.append(launch_with_tfcluster(cluster, workdir, f"{options.prefix}-up{run}"))
            for step, rounds in recoveries.items():
                rounds.append(recover_once(cluster, workdir, f"{options.prefix}-kill{step}-{run}", step))
    if not options.recovery_only:
        print(f"runs: kubectl create -k {', '.join(f'{t:.2f}' for t in hand)}; up -d {', '.join(f'{t:.2f}' for t in tool)}")
        print_table(f"launch to first training step (MWMS chief + 2 workers, real one-node Kubernetes; medians of "
                    f"{options.repeat})", ("kubectl create -k of the rendered manifests", statistics.median(hand)),
                    [("tfcluster up -b k8s -d", statistics.median(tool))])
    print(f"image: {k8s_e2e.image()}")
    for step, rounds in recoveries.items():
        print(f"recovery runs, kill after step {step} (launch, gang ended, replaced, restored, resumed, pods made):",
              "; ".join(", ".join(f"{t:.2f}" for t in r) for r in rounds))
        fresh, gang_ended, replaced, restored, resumed, made = (statistics.median(r[i] for r in rounds) for i in range(6))
        ratio = statistics.median(r[4] / r[0] for r in rounds)
        print_table(f"kill -9 of worker 1's process to the next training step (real one-node Kubernetes; medians of "
                    f"{options.repeat}; kill after step {step}; {made:.0f} pods made)", ("launch to first step (up)", fresh),
                    [("kill to the old gang's last pod ended", gang_ended), ("kill to the last replacement pod created", replaced),
                     ("kill to restored event", restored), ("kill to first step after restore", resumed)],
                    ratios=[gang_ended / fresh, replaced / fresh, restored / fresh, ratio])


if __name__ == "__main__":
    main()
