"""Shared helpers for the benchmarks: repeated timing and the ratio table."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Sequence


def median_seconds(command: Sequence[str], repeat: int = 7, **kwargs) -> float:
    """Median wall time of running ``command`` ``repeat`` times (after one warm-up run)."""
    subprocess.run(command, check=True, capture_output=True, **kwargs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(title: str, baseline: tuple[str, float], rows: list[tuple[str, float]], unit: str = "s") -> None:
    """Print each row's value and its ratio to the baseline measured in the same run."""
    name, base = baseline
    width = max(len(r[0]) for r in [baseline, *rows])
    print(f"\n{title}")
    print(f"{'measurement'.ljust(width)}  {'value':>10}  {'ratio':>7}")
    for label, value in [baseline, *rows]:
        print(f"{label.ljust(width)}  {value:>9.3f}{unit}  {value / base:>7.2f}")
    print(f"(ratio = value / {name})")
