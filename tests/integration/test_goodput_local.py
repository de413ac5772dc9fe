"""Goodput of a real TensorFlow job on the local backend, across a worker killed with SIGKILL.

The test reads the chief's events itself (its log file, with the run's token): the highest step reported
before the restore and the restored step give the steps done again; ``status -o json`` must count the
same, and its parts must add up to the wall time. After the end, ``status`` (text) shows the line and
the run's directory keeps the goodput.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_local_tf import TRAINING, finish, kill_task

from helpers.local_cluster import tfcluster, wait_status, write_spec
from helpers.task_events import read_events, run_token
from launcher.backends.local.state import LocalState
from launcher.plan.targets import BackendKind
from launcher.protocol.durations import for_people
from launcher.protocol.events import Restored, Step
from launcher.supervision.status import State

pytestmark = pytest.mark.tf

STEPS_PER_EPOCH = 60


def test_goodput_of_a_run_with_a_killed_worker_adds_up_and_counts_the_steps_done_again(tmp_path: Path) -> None:
    name = "gpk"
    spec = {"name": name, "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
            "checkpoint": {"backup_every_steps": None},  # a backup at each epoch's end only
            "training": {**TRAINING, "steps_per_epoch": STEPS_PER_EPOCH, "epochs": 3},
            "env": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
    up = tfcluster("up", "--detach", str(write_spec(tmp_path, spec)), cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    # Seen 10 steps into the second epoch, the kill lands in it (a poll is far shorter than its other 50 steps):
    # the chief restores the first epoch's backup and does again the steps it had reached since.
    wait_status(name, lambda s: (s.progress.step or 0) >= STEPS_PER_EPOCH + 10, timeout=180)
    kill_task(name, f"{name}-worker-1")
    status = finish(name)
    assert status.restarts == 1

    chief = read_events(LocalState.named(name).task_log(f"{name}-chief-0").read_text().splitlines(),
                        run_token(BackendKind.LOCAL, name))
    [restored] = [e for e in chief if isinstance(e, Restored)]
    reached = max(e.step for e in chief[:chief.index(restored)] if isinstance(e, Step))
    assert restored.step == STEPS_PER_EPOCH and reached >= STEPS_PER_EPOCH + 10, (restored, reached)

    shown = tfcluster("status", name, "-o", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["state"] == State.SUCCEEDED.value
    goodput = document["goodput"]
    lost = goodput["lost_seconds"]
    assert goodput["productive_seconds"] + sum(lost.values()) == pytest.approx(goodput["wall_seconds"], rel=0.02)
    assert goodput["recomputed_steps"] == reached - restored.step
    assert lost["start_up"] > 0 and lost["restarts"] > 0 and lost["recomputation"] > 0, goodput
    assert 0 < goodput["fraction"] < 1
    print(f"goodput: {goodput}; the chief reached step {reached}, restored step {restored.step}")

    text = tfcluster("status", name, cwd=tmp_path)
    assert f"goodput {goodput['fraction']:.0%} of {for_people(goodput['wall_seconds'])}" in text.stdout, text.stdout
    kept = json.loads(LocalState.named(name).files.status.read_text())  # the run's directory keeps it
    assert kept["goodput"] == goodput
