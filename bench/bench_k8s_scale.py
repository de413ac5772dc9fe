"""Kubernetes at scale on simulated nodes: python bench/bench_k8s_scale.py [--tasks 10 100 1000] [--quiet-seconds 60]

Needs the test cluster with simulated nodes, run as root on its host, under the e2e lock (nothing else may use the
cluster meanwhile: the request counts are the API server's, for every client)::

    TFCLUSTER_K8S_SIM_NODES=20 bash .ci/k8s.sh; source /tmp/k8s-ready   # or eval "$(...)"
    flock /tmp/k8s-e2e.lock /work/main/.venv/bin/python bench/bench_k8s_scale.py

For each size, a MultiWorkerMirrored run (a chief and N-1 workers, ``helpers.k8s_sim.sim_spec``) whose task pods go to
the simulated nodes (KWOK: Running at once, running nothing) and whose supervisor pod runs on the real node (the
cluster's worker image: main's code, whatever this tree holds), measured from outside:

- ``render``: the bytes ``tfcluster render -b k8s`` writes, per task;
- ``up -d``: the command's wall time (the launcher's user, as a user runs it);
- ``all Running``: from ``up``'s start until every task pod is Running (the administrator's reads, every second);
- a quiet minute (``--quiet-seconds``) once they all run, in which the bench sends nothing to the API server: the
  supervisor's requests, read from the API server's ``apiserver_request_total`` (administrator's ``/metrics``), by
  verb and resource (LIST of pods and of Jobs, WATCH, GET of a pod's log...), less what a quiet window of the same
  length before the first run counted (the control plane's own; the counter carries no user or user agent, so this
  difference is an attribution on an idle cluster) and, where .ci/k8s.sh keeps the API server's audit log, the
  requests the supervisor's own ServiceAccount sent, by verb and resource (``audited``); and the supervisor pod's
  CPU (its pod cgroup's ``cpuacct.usage`` over the minute) and memory (its working set, usage less inactive file,
  at the end, and the cgroup's peak ``max_usage_in_bytes``) read from the node's cgroup v1 files (this host is the
  node);
- ``status``: ``tfcluster status -o json`` wall time;
- reaction: one worker pod deleted (the administrator, default grace: KWOK removes it at once), until ``status``
  counts a restart or a preemption more (read every 0.5 s as ``status`` does, ``KubernetesBackend.describe``); then
  until every task pod runs again (the gang's restart: every task's Job made anew);
- ``down --volumes``: the command's wall time, and until nothing of the run is left (tasks, supervisor, claims).

Runs are named ``<prefix>-<N>`` and taken down whatever happened. ``--json PATH`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).parent)]

from bench_local_startup import CLI  # noqa: E402

from helpers import k8s_e2e, k8s_sim  # noqa: E402
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions  # noqa: E402
from launcher.plan import naming  # noqa: E402

#: How long one step (up, every pod Running, a reaction, down) may take before the bench gives up on the size.
TIMEOUT = 1200.0
#: The node's cgroup v1 hierarchies (cgroupfs driver: kubepods/[burstable|besteffort/]pod<uid>).
CGROUP = Path("/sys/fs/cgroup")
#: The API server's audit log (.ci/k8s.sh: metadata of the requests of the tests' namespace's ServiceAccounts).
AUDIT_LOG = Path("/var/lib/tfcluster-k8s/logs/audit.log")
#: One sample of ``apiserver_request_total``: its labels and its count.
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def request_counts(core: Any) -> Counter[tuple[str, str, str]]:
    """The API server's request counters summed by (verb, resource, subresource), namespace-scoped requests only
    (a run's supervisor makes no other). The text format's one sample line per label set is read with two regexes."""
    client = core.api_client
    response = client.call_api("GET", f"{client.configuration.host}/metrics")
    response.read()
    text = response.data.decode()
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in text.splitlines():
        if (sample := _SAMPLE.match(line)) is None:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        if labels.get("scope") == "namespace":
            counts[labels["verb"], labels["resource"], labels.get("subresource", "")] += int(float(sample["value"]))
    return counts


def audited(user: str, start: float, end: float) -> Counter[str] | None:
    """The requests ``user`` sent from ``start`` to ``end`` (epoch seconds), by verb and resource (``"list pods"``),
    read from the audit log: each request once (its ``auditID``; a watch's start counts, whenever it ends). None
    without an audit log (a cluster of an older .ci/k8s.sh)."""
    if not AUDIT_LOG.exists():
        return None
    from datetime import datetime

    seen: set[str] = set()
    counts: Counter[str] = Counter()
    for path in (AUDIT_LOG.with_name(AUDIT_LOG.name + ".1"), AUDIT_LOG):  # never more than one backup here
        for line in path.read_text(errors="replace").splitlines() if path.exists() else ():
            event = json.loads(line)
            if event.get("user", {}).get("username") != user or event["auditID"] in seen:
                continue
            received = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
            if start <= received < end:
                seen.add(event["auditID"])
                ref = event.get("objectRef", {})
                counts[" ".join(filter(None, (event["verb"], ref.get("resource"), ref.get("subresource"))))] += 1
    return counts


def per_minute(after: Counter[tuple[str, str, str]], before: Counter[tuple[str, str, str]],
               seconds: float) -> dict[str, float]:
    return {" ".join(p for p in key if p): (after[key] - before[key]) * 60 / seconds
            for key in sorted(set(after) | set(before)) if after[key] != before[key]}


class PodCgroup:
    """A pod's cgroup v1 files on this node."""

    def __init__(self, uid: str):
        found = sorted(CGROUP.glob(f"memory/kubepods*/**/pod{uid}")) or sorted(CGROUP.glob(f"memory/kubepods*/pod{uid}"))
        if not found:
            raise SystemExit(f"no cgroup of pod {uid} under {CGROUP}/memory/kubepods: is this host the node?")
        self.memory = found[0]
        self.cpu = CGROUP / "cpuacct" / self.memory.relative_to(CGROUP / "memory")

    def cpu_seconds(self) -> float:
        return int((self.cpu / "cpuacct.usage").read_text()) / 1e9

    def working_set(self) -> int:
        stat = dict(line.split() for line in (self.memory / "memory.stat").read_text().splitlines())
        return int((self.memory / "memory.usage_in_bytes").read_text()) - int(stat.get("total_inactive_file", 0))

    def peak(self) -> int:
        return int((self.memory / "memory.max_usage_in_bytes").read_text())


def until(what: str, done: Any, every: float = 1.0) -> float:
    """Seconds until ``done()`` is true (checked every ``every`` s); SystemExit after ``TIMEOUT``."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > TIMEOUT:
            raise TimeoutError(f"{what}: not within {TIMEOUT:.0f} s")
        time.sleep(every)
    return time.monotonic() - start


def cli(*args: str, cwd: Path) -> float:
    """Wall seconds of ``tfcluster ARGS`` (it must succeed)."""
    start = time.monotonic()
    ran = subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    if ran.returncode != 0:
        raise RuntimeError(f"tfcluster {' '.join(args)}: exit {ran.returncode}: {ran.stderr.strip()[-2000:]}")
    return time.monotonic() - start


def left(admin: Any, name: str) -> list[str]:
    """What is left of the run: its objects (``k8s_e2e.left_of``) and its supervisor's Job and pod."""
    selector = f"{naming.LABEL_SUPERVISOR}={name}"
    supervisor = [f"pod/{p.metadata.name}" for p in admin.list_namespaced_pod(k8s_e2e.namespace(),
                                                                              label_selector=selector).items]
    return k8s_e2e.left_of(name, admin) + supervisor


def supervisor_pod(admin: Any, name: str) -> Any:
    pods = admin.list_namespaced_pod(k8s_e2e.namespace(), label_selector=f"{naming.LABEL_SUPERVISOR}={name}").items
    running = [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    return running[0] if running else None


def measure(admin: Any, backend: KubernetesBackend, workdir: Path, name: str, tasks: int, quiet: float,
            baseline: dict[str, float]) -> dict[str, Any]:
    """One run of ``tasks`` measured (see the module's contract), taken down whatever happened."""
    spec = workdir / f"{name}.json"
    spec.write_text(json.dumps(k8s_sim.sim_spec(name, tasks)))
    rendered = workdir / f"{name}-rendered"
    cli("render", "-b", "k8s", "-d", str(rendered), str(spec), cwd=workdir)
    result: dict[str, Any] = {"tasks": tasks,
                              "render bytes per task": sum(f.stat().st_size for f in rendered.iterdir()) / tasks}
    start = time.monotonic()
    try:
        result["up -d s"] = cli("up", "-b", "k8s", "-d", str(spec), cwd=workdir)
        until("every task pod Running", lambda: k8s_sim.phases(admin, name)["Running"] == tasks)
        result["up to all Running s"] = time.monotonic() - start
        until("the supervisor pod Running", lambda: supervisor_pod(admin, name) is not None)
        pod = supervisor_pod(admin, name)
        cgroup = PodCgroup(pod.metadata.uid)
        time.sleep(10)  # the supervisor's round after the last start
        before, cpu_before, at, wall = request_counts(admin), cgroup.cpu_seconds(), time.monotonic(), time.time()
        time.sleep(quiet)
        after, cpu_after, seconds = request_counts(admin), cgroup.cpu_seconds(), time.monotonic() - at
        rates = per_minute(after, before, seconds)
        result["quiet minute requests"] = {k: round(v - baseline.get(k, 0.0), 1) for k, v in rates.items()}
        own = audited(f"system:serviceaccount:{k8s_e2e.namespace()}:{naming.service_account_name(name)}",
                      wall, wall + seconds)
        if own is not None:
            result["supervisor's requests in the quiet minute"] = {k: round(v * 60 / seconds, 1) for k, v in own.items()}
        result["supervisor cores"] = (cpu_after - cpu_before) / seconds
        result["supervisor working set MiB"] = cgroup.working_set() / 2**20
        result["supervisor peak MiB"] = cgroup.peak() / 2**20
        result["status s"] = cli("status", name, "-b", "k8s", "-o", "json", cwd=workdir)
        status = backend.describe(name)
        assert status is not None
        acted = status.restarts + status.preemptions
        victim = sorted(p.metadata.name for p in k8s_sim.task_pods(admin, name) if "-worker-" in p.metadata.name)[-1]
        deleted = time.monotonic()
        admin.delete_namespaced_pod(victim, k8s_e2e.namespace())

        def counted() -> bool:
            now = backend.describe(name)
            return now is not None and now.restarts + now.preemptions > acted

        result["delete to counted in status s"] = until("the deleted pod acted on", counted, every=0.5)
        until("every task pod Running again",
              lambda: (p := k8s_sim.phases(admin, name))["Running"] == tasks and sum(p.values()) == tasks)
        result["delete to all Running again s"] = time.monotonic() - deleted
    finally:
        down = time.monotonic()
        result["down --volumes s"] = cli("down", name, "-b", "k8s", "--volumes", cwd=workdir)
        until("nothing of the run left", lambda: not left(admin, name))
        result["down to nothing left s"] = time.monotonic() - down
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[10, 100, 1000], help="run sizes (chief + workers)")
    parser.add_argument("--quiet-seconds", type=float, default=60.0, help="the quiet window's length")
    parser.add_argument("--prefix", default=f"scale-{secrets.token_hex(2)}", help="the runs' names start with it")
    parser.add_argument("--json", type=Path, help="also write the numbers there")
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a run being measured is taken down (``finally``)
    k8s_e2e.from_kubeconfig_env()
    admin = k8s_sim.admin()
    nodes = k8s_sim.sim_nodes(admin)
    if not nodes:
        raise SystemExit("no simulated node Ready: TFCLUSTER_K8S_SIM_NODES=20 bash .ci/k8s.sh")
    backend = KubernetesBackend.create(KubernetesOptions(namespace=k8s_e2e.namespace()))
    before = request_counts(admin)
    time.sleep(options.quiet_seconds)
    baseline = per_minute(request_counts(admin), before, options.quiet_seconds)
    print(f"{nodes} simulated nodes; baseline, nothing running (requests per minute): {baseline}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for tasks in options.tasks:
            try:
                results.append(measure(admin, backend, Path(tmp), f"{options.prefix}-{tasks}", tasks,
                                       options.quiet_seconds, baseline))
            except Exception as exc:  # noqa: BLE001 - one size's failure is reported; the next sizes still run
                results.append({"tasks": tasks, "failed": f"{type(exc).__name__}: {exc}"})
            print(json.dumps(results[-1]), flush=True)
    if options.json:
        options.json.write_text(json.dumps({"sim nodes": nodes, "baseline per minute": baseline, "runs": results},
                                           indent=1))


if __name__ == "__main__":
    main()
