"""Kubernetes manifest rendering for 10 to 10,000 workers: time and bytes must grow linearly.

Baseline, measured in the same run for each size: a hand-written minimum,
``yaml.safe_dump`` of one ConfigMap holding ``json.dumps(plan.cluster)``;
every renderer must write at least the cluster's addresses once. The table
shows render time, its ratio to that baseline, the manifest bytes and the
bytes each added worker costs (flat = linear: one Job per task). Planning is excluded (it is the
planner's cost, the same for every backend). The cluster is written once; the entrypoint's tasks carry
no TF_CONFIG of their own.

Run: python bench/bench_k8s_render.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from launcher import api  # noqa: E402
from launcher.api import validate_data  # noqa: E402
from launcher.backends.kubernetes.backend import KubernetesBackend  # noqa: E402
from launcher.plan.planner import Plan  # noqa: E402

SIZES = (10, 100, 1_000, 10_000)


def median_call(function: Callable[[], object], repeat: int) -> float:
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def baseline(plan: Plan) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "data": {"cluster.json": json.dumps(plan.cluster)}})


def main() -> None:
    print("\nKubernetes render (chief + N workers)")
    print(f"{'workers':>8}  {'render':>9}  {'baseline':>9}  {'ratio':>6}  {'bytes':>10}  {'+bytes/+task':>12}")
    previous: tuple[int, int] | None = None
    for workers in SIZES:
        spec = validate_data({"name": "bench", "roles": {"chief": {}, "worker": {"replicas": workers}}})
        plan = api.plan(spec, "k8s")
        repeat = 5 if workers <= 1_000 else 3
        seconds = median_call(partial(KubernetesBackend.render, plan), repeat)
        base = median_call(partial(baseline, plan), repeat)
        size = sum(len(text.encode()) for text in KubernetesBackend.render(plan).values())
        marginal = f"{(size - previous[1]) / (workers - previous[0]):>12.1f}" if previous else f"{'':>12}"
        previous = (workers, size)
        print(f"{workers:>8}  {seconds * 1e3:>7.1f}ms  {base * 1e3:>7.1f}ms  {seconds / base:>6.2f}  {size:>10}  {marginal}")
    print("(ratio = render / baseline at the same size; +bytes/+task: bytes each added worker costs, flat = linear)")


if __name__ == "__main__":
    main()
