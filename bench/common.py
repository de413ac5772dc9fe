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


def print_table(title: str, baseline: tuple[str, float], rows: list[tuple[str, float]], unit: str = "s",
                ratios: Sequence[float] | None = None) -> None:
    """Print each row's value and its ratio to the baseline measured in the same run.

    ``ratios``: the rows' own ratios (e.g. medians of per-round ratios) instead of value / baseline.
    """
    name, base = baseline
    width = max(len(r[0]) for r in [baseline, *rows])
    shown = [1.0, *(ratios if ratios is not None else (value / base for _, value in rows))]
    print(f"\n{title}")
    print(f"{'measurement'.ljust(width)}  {'value':>10}  {'ratio':>7}")
    for (label, value), ratio in zip([baseline, *rows], shown, strict=True):
        print(f"{label.ljust(width)}  {value:>9.3f}{unit}  {ratio:>7.3f}")
    print(f"(ratio = value / {name}" + (", the median of the ratios of each round)" if ratios is not None else ")"))


def print_comparison(title: str, rows: Sequence[tuple[str, float, float, float]]) -> None:
    """Print each quantity (its unit in its label) as tfcluster accounts it, as the bench measured it from outside,
    and the difference (tfcluster - outside), given: e.g. the median of each round's differences."""
    width = max(len("quantity"), *(len(row[0]) for row in rows))
    print(f"\n{title}")
    print(f"{'quantity'.ljust(width)}  {'tfcluster':>9}  {'outside':>9}  {'difference':>10}")
    for label, ours, outside, difference in rows:
        print(f"{label.ljust(width)}  {ours:>9.2f}  {outside:>9.2f}  {difference:>+10.2f}")
