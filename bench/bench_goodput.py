"""Goodput against an outside measurement (not run in CI): python bench/bench_goodput.py [--repeat N] [--kill-at S ...]

A local MWMS job (the demo's model, chief + 1 worker, a backup every 50 steps) runs in the foreground
(``tfcluster up``, no ``--detach``); the bench reads the chief's event lines as they come and ``kill -9``s
the worker once the chief has reported step ``--kill-at`` (twice by default: 130, then 330 in the run
after the first restore). Afterwards it compares ``status NAME -o json``'s ``goodput`` with what it
measured itself, as a table of the medians of ``--repeat`` runs:

- wall time: from starting ``tfcluster up`` to its exit (the job's end);
- start-up: from starting ``up`` to the chief's first step;
- steps done again: for each restore, the highest step the chief reported before it, minus the step restored;
- restarts: from each kill to the chief's first step after the restore that followed it;
- lost to failures: restarts plus the steps done again at the steady step time;
- productive: the steps trained once (the last step) at the steady step time (the median seconds per step
  between consecutive step reports of one run; a report comes every steps_per_epoch / 4 steps), and the
  fraction of the wall time it is;
- the final save and export: from the chief's last step to ``up``'s exit (tfcluster's ``finishing``).

The pure part (``measured``, from the events, the kills and the two ends) is unit-tested
(``tests/unit/bench/test_bench_goodput.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).parent))

from common import print_comparison  # noqa: E402

from launcher.protocol import events  # noqa: E402

CLI = [sys.executable, "-m", "launcher"]
NAME = "bench-goodput"
SPEC: dict[str, Any] = {
    "name": NAME,
    "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}},
    "training": {"epochs": 12, "steps_per_epoch": 40, "batch_size_per_replica": 32},
    "checkpoint": {"backup_every_steps": 50},
    "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
}
KILL_AT = (130, 330)


@dataclass(frozen=True)
class Outside:
    """What the bench measured of one run from outside (seconds, steps)."""

    wall_seconds: float
    start_up_seconds: float
    recomputed_steps: int
    #: From each kill to the chief's first step after the restore that followed it.
    kill_to_step_seconds: tuple[float, ...]
    step_seconds: float
    #: Steps trained once: the highest step reported.
    fresh_steps: int
    #: From the last step reported to ``up``'s exit (the final save and export, the tasks' and the supervisor's end).
    tail_seconds: float

    @property
    def restart_seconds(self) -> float:
        return sum(self.kill_to_step_seconds)

    @property
    def failure_seconds(self) -> float:
        return self.restart_seconds + self.recomputed_steps * self.step_seconds

    @property
    def productive_seconds(self) -> float:
        return self.fresh_steps * self.step_seconds

    @property
    def fraction(self) -> float:
        return self.productive_seconds / self.wall_seconds


def measured(started: float, ended: float, chief: Sequence[events.Event], kills: Sequence[float]) -> Outside:
    """The outside account of a run whose ``up`` started at ``started`` and exited at ``ended``, from the chief's
    events in log order and the times of the kills (unix seconds)."""
    steps = [event for event in chief if isinstance(event, events.Step)]
    if not steps:
        raise ValueError("the chief reported no step")
    again = 0
    reached: int | None = None  # the highest step of the current run
    pace: list[float] = []
    previous: events.Step | None = None
    for event in chief:
        if isinstance(event, events.Restored):
            again += max(0, reached - event.step) if reached is not None else 0
            reached, previous = None, None
        elif isinstance(event, events.Step):
            if previous is not None and event.step > previous.step:
                pace.append((event.time - previous.time) / (event.step - previous.step))
            reached, previous = max(reached or 0, event.step), event
    return Outside(wall_seconds=ended - started, start_up_seconds=steps[0].time - started, recomputed_steps=again,
                   kill_to_step_seconds=tuple(_first_step_after_restore(chief, kill) - kill for kill in kills),
                   step_seconds=statistics.median(pace) if pace else 0.0, fresh_steps=max(s.step for s in steps),
                   tail_seconds=ended - max(s.time for s in steps))


def _first_step_after_restore(chief: Sequence[events.Event], kill: float) -> float:
    """The time of the chief's first step after the first restore stamped after ``kill`` (a step the killed
    run reported late is not one)."""
    restored = False
    for event in chief:
        restored = restored or (isinstance(event, events.Restored) and event.time > kill)
        if restored and isinstance(event, events.Step):
            return event.time
    raise ValueError(f"no step after a restore after the kill at {kill}")


def run_once(workdir: Path, kill_at: Sequence[int]) -> tuple[dict[str, Any], Outside]:
    """One run: tfcluster's ``goodput`` and the outside account."""
    from bench_local_startup import chief_log, wait_event

    from launcher.backends.local.state import LocalState

    path = workdir / "spec.json"
    path.write_text(json.dumps(SPEC))
    with open(workdir / "up.log", "wb") as out:
        started = time.time()
        up = subprocess.Popen([*CLI, "up", "-b", "local", str(path)], cwd=workdir, stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT)
    try:
        log = _when_planned(lambda: chief_log(NAME, "local"), up)
        kills, since = [], 0.0
        for step in kill_at:
            after = wait_event(log, "restored", after=since)["time"] if kills else 0.0
            wait_event(log, "step", after=after, min_step=step, timeout=600)
            since = time.time()
            os.kill(LocalState.named(NAME).read_groups()[f"{NAME}-worker-0"], signal.SIGKILL)
            kills.append(since)
        code = up.wait(timeout=1800)
        ended = time.time()
        if code != 0:
            raise RuntimeError(f"tfcluster up exited {code}: {(workdir / 'up.log').read_text()[-2000:]}")
        shown = subprocess.run([*CLI, "status", NAME, "-o", "json"], cwd=workdir, check=True, capture_output=True, text=True)
        reader = events.EventReader(log.token)
        chief = [event for event in map(reader.parse, log.lines()) if event is not None]
        return json.loads(shown.stdout)["goodput"], measured(started, ended, chief, kills)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        subprocess.run([*CLI, "down", "--volumes", "-b", "local", NAME], cwd=workdir, capture_output=True)


def _when_planned(read: Any, up: subprocess.Popen[bytes], timeout: float = 300.0) -> Any:
    """``read()`` once ``up`` has written the run's plan (it raises until then)."""
    ends = time.monotonic() + timeout
    while True:
        try:
            return read()
        except Exception:
            if up.poll() is not None or time.monotonic() > ends:
                raise
            time.sleep(0.2)


def rows(goodput: dict[str, Any], outside: Outside) -> list[tuple[str, float, float]]:
    """Each quantity: (label with its unit, tfcluster's value, the outside value)."""
    lost = goodput["lost_seconds"]
    return [
        ("wall time, up to its exit (s)", goodput["wall_seconds"], outside.wall_seconds),
        ("start-up, up to the first step (s)", lost["start_up"], outside.start_up_seconds),
        ("steps done again", goodput["recomputed_steps"], outside.recomputed_steps),
        ("restarts: kill to the first step after (s)", lost["restarts"], outside.restart_seconds),
        ("lost to failures: restarts + steps again (s)", lost["restarts"] + lost["recomputation"], outside.failure_seconds),
        ("final save and export: last step to the end (s)", lost.get("finishing", 0.0), outside.tail_seconds),
        ("productive: steps once x step time (s)", goodput["productive_seconds"], outside.productive_seconds),
        ("goodput fraction: productive / wall", goodput["fraction"], outside.fraction),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs (median)")
    parser.add_argument("--kill-at", type=int, nargs="+", default=list(KILL_AT),
                        help="kill the worker once the chief reports this step (each in the run after the last restore)")
    options = parser.parse_args()
    table: list[list[tuple[str, float, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TFCLUSTER_HOME"] = str(Path(tmp) / "home")
        for run in range(options.repeat):
            workdir = Path(tmp) / f"run{run}"
            workdir.mkdir()
            goodput, outside = run_once(workdir, options.kill_at)
            print(f"run {run}: goodput {json.dumps(goodput)}; outside {outside}", flush=True)
            table.append(rows(goodput, outside))
    medians = [(label, statistics.median(r[i][1] for r in table), statistics.median(r[i][2] for r in table),
                statistics.median(r[i][1] - r[i][2] for r in table)) for i, (label, _, _) in enumerate(table[0])]
    print_comparison(f"goodput: tfcluster's account against the bench's own (MWMS chief + worker, local; kill -9 of "
                     f"the worker at steps {', '.join(map(str, options.kill_at))}; medians of {options.repeat})", medians)


if __name__ == "__main__":
    main()
