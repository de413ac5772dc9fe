"""Training throughput through the shared entrypoint vs a hand-written tf_keras script.

Both run the same MultiWorkerMirroredStrategy cluster (chief + 1 worker on
loopback, TF_CONFIG from the same local plan), the same model and dataset
(``launcher.examples.mnist``) and the same global batch. Throughput is
examples/s over steps 300..900 of a 1200-step epoch (after tracing, warm-up
and the first two backups of every row, which set the copy up and trace it;
away from the epoch-end checkpoint; ~15 s, long enough that a few slow steps
of this shared machine do not decide a ratio), read from the chief's
``step`` events for the entrypoint and from a batch-end callback for the
baseline. The window is a multiple of every fixed backup interval, so it
holds each row's average share of backups (one per interval; none for the
per-epoch row).
The entrypoint's tasks run as a local launch starts them, with TCMalloc
preloaded where the host has it (``launcher.backends.tcmalloc``). There are
two baselines: the script as a user starts it by hand (glibc's malloc: the
goal's baseline), and the same script with TCMalloc preloaded too (the
second table, on a host that has it: what the backups and the entrypoint
cost, without the allocator's gain).
``--repeat N`` runs N rounds, each the baselines, every row and the
baselines again; a row's ratio in a round is against the mean of that
round's two runs of a baseline (a drift during the round weighs on both
sides), its ratio the median over the rounds, printed with the range of the
rounds' ratios.
Backups are asynchronous (the spec default) unless the row says synchronous;
the ``auto`` row lets the tasks choose the interval (``backup_every_steps:
auto``). Goal: ratio >= 0.97 with a backup every 10 steps.

Run: python bench/bench_throughput.py [--repeat N]   (not run in CI; ~6 min per round)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO / "tests"))
from common import print_table  # noqa: E402
from handwritten import MNIST_PREAMBLE, run_training_tasks  # noqa: E402

from helpers.tf_cluster import cluster_spec, describe, run_cluster  # noqa: E402
from launcher.api import plan as make_plan  # noqa: E402
from launcher.backends import tcmalloc  # noqa: E402
from launcher.spec.models import CheckpointSpec  # noqa: E402

EPOCHS, STEPS, BATCH = 1, 1200, 64
WINDOW = (300, 900)  # steps within the measured epoch (1-based, at batch end)
MEASURED_EPOCH = 0
DEFAULT_BACKUP_EVERY_STEPS = CheckpointSpec().backup_every_steps
BACKUP_INTERVALS = (DEFAULT_BACKUP_EVERY_STEPS, 10)

BASELINE = MNIST_PREAMBLE.format(batch=BATCH) + f"""
marks = {{}}

class Clock(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == {MEASURED_EPOCH} and batch + 1 in {WINDOW}:
            marks[batch + 1] = time.time()

model.fit(dataset, epochs={EPOCHS}, steps_per_epoch={STEPS}, callbacks=[Clock()], verbose=0)
(first, last) = {WINDOW}
print("BASELINE", json.dumps({{"seconds": marks[last] - marks[first], "steps": last - first, "global_batch": global_batch}}))
"""


def _spec(checkpoint_dir: Path, backup_every_steps: int | str | None, async_backups: bool = True):
    return cluster_spec(
        "bench", {"chief": 1, "worker": 1}, checkpoint_dir,
        checkpoint={"dir": str(checkpoint_dir), "backup_every_steps": backup_every_steps,
                    "async_backups": async_backups},
        training={"epochs": EPOCHS, "steps_per_epoch": STEPS, "batch_size_per_replica": BATCH},
    )


def entrypoint_throughput(backup_every_steps: int | str | None, async_backups: bool = True) -> float:
    with TemporaryDirectory() as tmp:
        results = run_cluster(_spec(Path(tmp), backup_every_steps, async_backups), "bench", timeout=600)
        chief = results["bench-chief-0"]
        if any(r.returncode != 0 for r in results.values()):
            raise SystemExit(describe(results))
        global_batch = chief.of("started")[0].global_batch_size
        first, last = (MEASURED_EPOCH * STEPS + s for s in WINDOW)
        times = {e.step: e.time for e in chief.of("step")}
        if first not in times or last not in times:
            raise SystemExit(f"no step events at {first} and {last}: step events every {STEPS // 4} steps expected")
        return (last - first) * global_batch / (times[last] - times[first])


def baseline_throughput(preload: bool) -> float:
    """The hand-written script as a user starts it (glibc's malloc), or with the allocator tfcluster preloads."""
    with TemporaryDirectory() as tmp:
        output = run_training_tasks(make_plan(_spec(Path(tmp), None), "local", "bench", launching=True), BASELINE,
                                    env=None if preload else {tcmalloc.PRELOAD: ""})
    line = next(text for text in output.splitlines() if text.startswith("BASELINE "))
    result = json.loads(line.removeprefix("BASELINE "))
    return result["steps"] * result["global_batch"] / result["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="rounds, each the baseline and every row (medians)")
    repeat = parser.parse_args().repeat
    if STEPS % 4 or any(s % (STEPS // 4) for s in WINDOW):
        raise SystemExit("WINDOW must fall on step events (every STEPS // 4 steps)")
    if any(every is None or (WINDOW[1] - WINDOW[0]) % every for every in BACKUP_INTERVALS):
        raise SystemExit(f"WINDOW must span a multiple of every backup interval {BACKUP_INTERVALS}")

    rows = {
        "entrypoint, backup per epoch": partial(entrypoint_throughput, None),
        f"entrypoint, backup every {DEFAULT_BACKUP_EVERY_STEPS} steps (spec default)":
            partial(entrypoint_throughput, DEFAULT_BACKUP_EVERY_STEPS),
        "entrypoint, backup every 10 steps": partial(entrypoint_throughput, 10),
        "entrypoint, backup every 10 steps, synchronous": partial(entrypoint_throughput, 10, False),
        "entrypoint, backup_every_steps: auto": partial(entrypoint_throughput, "auto"),
    }
    # as a user starts it; with TCMalloc too where this host has it (the entrypoint's tasks have it then)
    baselines: dict[bool, list[float]] = {False: [], **({True: []} if tcmalloc.preload_env() else {})}
    values: dict[str, list[float]] = {label: [] for label in rows}
    for _ in range(repeat):
        before = {preload: baseline_throughput(preload) for preload in baselines}
        for label, measure in rows.items():
            values[label].append(measure())
        for preload, found in baselines.items():
            found.append((before[preload] + baseline_throughput(preload)) / 2)
    for preload, found_baselines in baselines.items():
        name = "hand-written, TCMalloc preloaded" if preload else "hand-written tf_keras MWMS"
        ratios = {label: [v / b for v, b in zip(found, found_baselines, strict=True)]
                  for label, found in values.items()}
        print_table(
            f"MWMS chief+1 worker, MNIST CNN, global batch {BATCH * 2}: examples/s (higher is better, goal ratio >= 0.97"
            f" against the first table's baseline; medians of {repeat} rounds)",
            (name, statistics.median(found_baselines)),
            [(label, statistics.median(found)) for label, found in values.items()], unit=" ex/s",
            ratios=[statistics.median(each) for each in ratios.values()],
        )
        for label, each in ratios.items():
            print(f"{label}: ratios of the {repeat} rounds {min(each):.3f}..{max(each):.3f}")


if __name__ == "__main__":
    main()
