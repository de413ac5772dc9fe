"""CLI cold start: tfcluster commands vs a bare `python -c pass`, as ratios measured in one run.

Run: python bench/bench_cli_startup.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import median_seconds, print_table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "launcher"]


def main() -> None:
    baseline = ("python -c pass", median_seconds([sys.executable, "-c", "pass"]))
    rows = [
        (f"tfcluster {' '.join(args)}", median_seconds([*CLI, *args], cwd=REPO))
        for args in (
            ["--help"],
            ["validate", "examples/demo.yaml"],
            ["dry-run", "examples/demo.yaml", "-o", "json"],
            ["dry-run", "examples/parameter-server.yaml"],
            ["dry-run", "examples/parameter-server.yaml", "-b", "k8s", "-o", "json"],
        )
    ]
    print_table("CLI cold start", baseline, rows)


if __name__ == "__main__":
    main()
