"""``tfcluster run``: users' own scripts, unmodified, on real TensorFlow processes (local backend).

The scripts know nothing of tfcluster but TF_CONFIG (``examples/byo/train.py``,
``tests/integration/scripts/``); each runs from a fresh workspace directory,
the working directory of every task.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.local_cluster import CLI, assert_nothing_left, processes, tfcluster, wait_status
from helpers.paths import REPO
from helpers.run_names import run_name
from helpers.task_events import read_events, run_token
from launcher.backends.local.state import LocalState
from launcher.plan.targets import BackendKind
from launcher.supervision.status import State

pytestmark = pytest.mark.tf

SCRIPTS = Path(__file__).parent / "scripts"
QUIET = ("--env", "TF_CPP_MIN_LOG_LEVEL=2")
#: The stall tests' cluster (``stall_spec``).
STUCK = run_name("stuck-progress")


def workspace(tmp_path: Path, *scripts: Path) -> Path:
    for script in scripts:
        shutil.copy(script, tmp_path / script.name)
    return tmp_path


def test_an_unmodified_mwms_script_trains_on_three_workers(tmp_path: Path) -> None:
    ws = workspace(tmp_path, REPO / "examples" / "byo" / "train.py")
    result = subprocess.run([*CLI, "run", "--workers", "3", *QUIET, "train.py", "--epochs", "1"], cwd=ws,
                            capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    logs = tfcluster("logs", "train", cwd=ws).stdout
    for index in range(3):
        assert f"train-worker-{index} | worker {index} done, 3 replicas" in logs


def test_an_unmodified_keras_script_with_checkpoints_tensorboard_and_save(tmp_path: Path) -> None:
    ws = workspace(tmp_path, SCRIPTS / "keras_callbacks.py")
    result = tfcluster("run", "--workers", "1", "--name", "keras", *QUIET, "keras_callbacks.py", cwd=ws, timeout=300)
    assert result.returncode == 0, tfcluster("logs", "keras", cwd=ws).stdout[-3000:]
    assert (ws / "model.keras").is_file()  # relative paths land in the workspace
    assert sorted(p.name for p in (ws / "checkpoints").iterdir()) == ["ckpt-01.weights.h5", "ckpt-02.weights.h5"]
    assert list((ws / "logs" / "train").glob("events.out.tfevents.*"))


def _detached_until_done(ws: Path, name: str, *launch: str) -> None:
    result = tfcluster(*launch, cwd=ws)
    assert result.returncode == 0, result.stderr
    wait_status(name, lambda s: s.state is State.RUNNING, timeout=60)
    running = processes(name)
    assert len(LocalState.named(name).read_groups()) == 4
    status = wait_status(name, lambda s: s.state.terminal, timeout=300)
    chief_log = LocalState.named(name).task_log(f"{name}-chief-0").read_text()[-3000:]
    assert status.state is State.SUCCEEDED, f"{status.message}\n{chief_log}"
    assert "coordinator done" in chief_log
    assert_nothing_left(*running)


def test_a_pss_coordinator_script_runs_on_the_chief_and_tfcluster_serves_ps_and_workers(tmp_path: Path) -> None:
    ws = workspace(tmp_path, SCRIPTS / "pss_coordinator.py")
    name = run_name("pss-coord")
    _detached_until_done(ws, name, "run", "--detach", "--name", name, *QUIET, "--ps", "1",
                         "--workers", "2", "pss_coordinator.py")


def test_a_pss_script_whose_servers_join_forever_is_stopped_after_the_chief_succeeded(tmp_path: Path) -> None:
    ws = workspace(tmp_path, SCRIPTS / "pss_coordinator.py", SCRIPTS / "pss_join.py")
    program = [sys.executable, "pss_join.py"]
    name = run_name("pss-join")
    spec = {"name": name, "strategy": "parameter_server", "command": program, "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
            "roles": {"chief": {}, "ps": {"command": program}, "worker": {"replicas": 2, "command": program}}}
    (ws / "cluster.yaml").write_text(yaml.safe_dump(spec))
    _detached_until_done(ws, name, "up", "--detach", "cluster.yaml")
    logs = tfcluster("logs", name, f"{name}-ps-0", cwd=ws).stdout
    assert "launcher.worker" not in logs  # the script's own server ran, not tfcluster's


def test_a_script_with_the_progress_callback_reports_like_the_entrypoint(tmp_path: Path) -> None:
    ws = workspace(tmp_path, SCRIPTS / "keras_progress.py")
    result = tfcluster("run", "--workers", "1", *QUIET, "keras_progress.py", cwd=ws, timeout=300)
    assert result.returncode == 0, tfcluster("logs", "keras-progress", cwd=ws).stdout[-3000:]
    status = json.loads(tfcluster("status", "keras-progress", "-o", "json", cwd=ws).stdout)
    progress = status["progress"]
    assert (progress["event"], progress["epochs"], progress["epoch"], progress["step"]) == ("finished", 2, 1, 16)
    assert progress["total_steps"] == 16 and progress["num_replicas_in_sync"] == 1
    assert isinstance(progress["metrics"]["loss"], float)
    events = read_events(LocalState.named("keras-progress").task_log("keras-progress-worker-0").read_text().splitlines(),
                         run_token(BackendKind.LOCAL, "keras-progress"))
    assert [e.step for e in events if e.event == "step"] == [1, 4, 8, 12, 16]  # the run's first step, then every 4


def test_a_custom_loop_reporting_with_the_two_functions_shows_like_the_entrypoint(tmp_path: Path) -> None:
    ws = workspace(tmp_path, SCRIPTS / "custom_progress.py")
    result = tfcluster("run", "--workers", "2", *QUIET, "custom_progress.py", cwd=ws, timeout=300)
    assert result.returncode == 0, tfcluster("logs", "custom-progress", cwd=ws).stdout[-3000:]
    progress = json.loads(tfcluster("status", "custom-progress", "-o", "json", cwd=ws).stdout)["progress"]
    assert (progress["event"], progress["epoch"], progress["step"], progress["total_steps"]) == ("finished", 1, 16, 16)
    assert isinstance(progress["metrics"]["loss"], float)
    state = LocalState.named("custom-progress")
    lead, other = (read_events(state.task_log(f"custom-progress-worker-{i}").read_text().splitlines(), state.record.read_plan().event_token)
                   for i in (0, 1))
    assert [e.step for e in lead if e.event == "step"] == [4, 8, 12, 16]
    assert [(e.epoch, type(e.metrics["loss"])) for e in lead if e.event == "epoch"] == [(0, float), (1, float)]
    assert not [e for e in other if e.event in ("step", "epoch")]  # worker 1 does not lead: each step is seen once


def stall_spec(ws: Path, timeout_seconds: int | None) -> Path:
    """The stuck-progress cluster; ``timeout_seconds`` None: the default stall settings."""
    path = ws / "cluster.yaml"
    stall = {} if timeout_seconds is None else {"stall": {"timeout_seconds": timeout_seconds}}
    path.write_text(yaml.safe_dump({"name": STUCK, "roles": {"chief": {}, "worker": {"replicas": 2}}, **stall}))
    return path


def test_a_script_with_the_progress_callback_stuck_in_its_input_pipeline_is_restarted_and_succeeds(
        tmp_path: Path) -> None:
    """With the default stall settings (time alone: 600 s, longer than this test may take) the watchdog reads
    the stacks after 30 s without progress, twice: worker 1's input pipeline holds its peers, unchanged."""
    ws = workspace(tmp_path, SCRIPTS / "stuck_progress.py")
    spec = stall_spec(ws, None)
    result = tfcluster("run", "-f", str(spec), *QUIET, "stuck_progress.py", "--block", cwd=ws, timeout=500)
    assert result.returncode == 0, tfcluster("logs", STUCK, cwd=ws).stdout[-3000:]
    status = json.loads(tfcluster("status", STUCK, "-o", "json", cwd=ws).stdout)
    assert status["state"] == "succeeded" and status["restarts"] == 1, status["message"]
    stall = status["stall"]
    assert stall["watching"] and stall["stalls"] == 1 and stall["suspects"] == [f"{STUCK}-worker-1"], stall
    assert stall["evidence"] == "stacks_unchanged" and "(stacks read after 30 s)" in stall["message"], stall
    assert "in gate" in (Path(stall["stacks_dir"]) / f"{STUCK}-worker-1.txt").read_text()
    assert_nothing_left(*processes(STUCK))


def test_a_slow_first_step_and_slow_saves_never_trip_the_watchdog(tmp_path: Path) -> None:
    """First step 1.5x the floor (under the first-step allowance), each epoch's save half the floor (the floor
    alone covers the first epoch's end), and the lead's exit after ``finished`` under its own allowance."""
    ws = workspace(tmp_path, SCRIPTS / "stuck_progress.py")
    spec = stall_spec(ws, 10)
    result = tfcluster("run", "-f", str(spec), *QUIET, "stuck_progress.py", "--first-delay", "15",
                       "--save-delay", "5", "--epochs", "2", cwd=ws, timeout=500)
    assert result.returncode == 0, tfcluster("logs", STUCK, cwd=ws).stdout[-3000:]
    status = json.loads(tfcluster("status", STUCK, "-o", "json", cwd=ws).stdout)
    assert status["state"] == "succeeded" and status["restarts"] == 0, (status["message"], status["stall"])
    assert status["stall"]["watching"] and status["stall"]["stalls"] == 0, status["stall"]


def test_saves_that_outlast_the_floor_while_they_work_never_trip_the_watchdog(tmp_path: Path) -> None:
    """The epoch's save works 20 s, 2x the 10 s floor (time alone would restart the job): the stacks, read after
    the floor, move between the samples, so the watchdog lets it work. One epoch: a second save would be allowed on
    time alone (3x the longest interval, this save's 20 s), with no stacks read."""
    ws = workspace(tmp_path, SCRIPTS / "stuck_progress.py")
    spec = stall_spec(ws, 10)
    result = tfcluster("run", "-f", str(spec), *QUIET, "stuck_progress.py", "--working-save", "20", "--epochs", "1",
                       cwd=ws, timeout=500)
    assert result.returncode == 0, tfcluster("logs", STUCK, cwd=ws).stdout[-3000:]
    status = json.loads(tfcluster("status", STUCK, "-o", "json", cwd=ws).stdout)
    assert status["state"] == "succeeded" and status["restarts"] == 0, (status["message"], status["stall"])
    checks = LocalState.named(STUCK).log.read_text()
    assert "stacks moved, not a stall" in checks, checks  # each save was looked at, and let work
    stall = status["stall"]
    if stall["stalls"]:  # on a loaded host the lead's exit after training may outlast its allowance: told only
        assert stall["stalls"] == 1 and stall["message"].startswith("stalled after training finished"), stall
    else:
        assert stall["evidence"] == "stacks_moved" and "stacks moved, not a stall" in stall["last_check"], stall
