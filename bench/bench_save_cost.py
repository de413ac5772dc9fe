"""What one backup costs the training steps, timed step by step (not run in CI).

Run: python bench/bench_save_cost.py [--repeat N] [--every K]   (~1 min per round)

A throughput ratio (``bench_throughput.py``) mixes a save's cost with this
shared machine's drift between runs, which is as large as the cost. Here
the cost is read inside one run: a MultiWorkerMirrored cluster (chief + 1
worker on loopback, TF_CONFIG and the preloaded allocator from the same local
plan as the entrypoint's) trains the MNIST CNN of ``launcher.examples.mnist``
with the entrypoint's ``Backups`` callback (``launcher.worker.backups``)
saving every ``--every`` steps, and the chief times every step. Steps are grouped by their position
after a save: position 0 is the interval that holds the save (the save, then
the next step), position 1 the next step (when the asynchronous write runs),
and so on. The cost of a save is the sum over the positions of their mean
excess over the steps farthest from a save (the median of positions 3 to
K-2): both sides come from the same minute of the same run. It is printed in
milliseconds and as a share of the interval between saves, for asynchronous
and synchronous backups, each the median over ``--repeat`` rounds. Steps
before ``WARM_STEPS`` (tracing, warm-up and the first two saves, which set
the copy up and trace it) are left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from handwritten import MNIST_PREAMBLE, run_training_tasks  # noqa: E402

from helpers.tf_cluster import cluster_spec  # noqa: E402
from launcher.api import plan as make_plan  # noqa: E402

STEPS, BATCH, WARM_STEPS = 700, 64, 100

TASK = MNIST_PREAMBLE.format(batch=BATCH) + f"""
from launcher.worker.backups import Backups

backup_dir, every, asynchronous = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "async"
ends = []

class Clock(tf.keras.callbacks.Callback):  # first: a step's end is timed before its save
    def on_train_batch_end(self, batch, logs=None):
        ends.append(time.perf_counter())

model.fit(dataset, epochs=1, steps_per_epoch={STEPS}, verbose=0,
          callbacks=[Clock(), Backups(backup_dir, every, asynchronous)])
print("STEPS", json.dumps([b - a for a, b in zip(ends, ends[1:])]))
"""


def excess_by_position(step_seconds: list[float], every: int) -> tuple[list[float], float]:
    """(each position's mean seconds beyond the reference, the reference) from the chief's step times.

    ``step_seconds[i]`` is the interval from step ``i + 1``'s end to step ``i + 2``'s: the interval
    after step ``s``'s end (which saves when ``s % every == 0``) is ``step_seconds[s - 1]``.
    """
    by_position: list[list[float]] = [[] for _ in range(every)]
    for index, seconds in enumerate(step_seconds):
        step = index + 1
        if step >= WARM_STEPS and step + every <= len(step_seconds):
            by_position[step % every].append(seconds)
    means = [statistics.mean(found) for found in by_position]
    far = statistics.median(means[3:every - 1])
    return [mean - far for mean in means], far


def one_run(every: int, mode: str) -> tuple[list[float], float]:
    with TemporaryDirectory() as tmp:
        spec = cluster_spec("bench", {"chief": 1, "worker": 1}, Path(tmp),
                            training={"epochs": 1, "steps_per_epoch": STEPS, "batch_size_per_replica": BATCH})
        plan = make_plan(spec, "local", "bench", launching=True)
        output = run_training_tasks(plan, TASK, str(Path(tmp) / "backup"), str(every), mode)
    line = next(text for text in output.splitlines() if text.startswith("STEPS "))
    return excess_by_position(json.loads(line.removeprefix("STEPS ")), every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds, each every mode once (medians)")
    parser.add_argument("--every", type=int, default=10, help="steps between backups (at least 6)")
    args = parser.parse_args()
    if args.every < 6:
        raise SystemExit("--every must be at least 6: positions 3 to every-2 are the reference")
    results: dict[str, list[tuple[list[float], float]]] = {"async": [], "sync": []}
    for _ in range(args.repeat):
        for mode, found in results.items():
            found.append(one_run(args.every, mode))
    print(f"\nMWMS chief+1 worker, MNIST CNN, global batch {BATCH * 2}, a backup every {args.every} steps:"
          f" what a save adds to the steps (medians of {args.repeat} rounds)")
    for mode, found in results.items():
        costs = [sum(excess) for excess, _ in found]
        step = statistics.median(far for _, far in found)
        share = statistics.median(sum(excess) / (args.every * far) for excess, far in found)
        positions = [statistics.median(excess[k] for excess, _ in found) for k in range(args.every)]
        print(f"{mode:>5}: {statistics.median(costs) * 1e3:6.2f} ms per save, {share:.1%} of the interval"
              f" (step {step * 1e3:.2f} ms; rounds {', '.join(f'{c * 1e3:.2f}' for c in costs)} ms);"
              f" by position after the save: {' '.join(f'{p * 1e3:+.1f}' for p in positions)} ms")


if __name__ == "__main__":
    main()
