"""``tfcluster up/status/logs/down`` on the local backend, as real commands in real shells.

Tasks are small Python scripts (command overrides). After every test no
process of the cluster may be left: the daemon and every task's process
group are checked with signal 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.local_cluster import CLI, assert_nothing_left, processes, tfcluster, wait_status, write_spec
from launcher.backends.local.processes import group_alive
from launcher.backends.local.state import LocalState
from launcher.cli import registry
from launcher.supervision.statefile import write_json
from launcher.supervision.status import State

SLEEP = [sys.executable, "-c", "import time; print('serving', flush=True); time.sleep(120)"]


def write(tmp_path: Path, name: str, roles: dict[str, Any], **fields: Any) -> Path:
    return write_spec(tmp_path, {"name": name, "roles": roles, **fields})


def wait_running(name: str, tasks: int) -> None:
    wait_status(name, lambda s: s.state is State.RUNNING and len(LocalState.named(name).read_groups()) == tasks, 30)


def test_up_runs_to_success_and_keeps_logs(tmp_path: Path) -> None:
    event = 'TFCLUSTER_EVENT {"event":"epoch","task":"ok-chief-0","time":0,"epoch":1,"step":4,"metrics":{"loss":0.25}}'
    spec = write(tmp_path, "ok", {
        "chief": {"command": [sys.executable, "-c", f"import time; print({event!r}); time.sleep(1)"]},
        "worker": {"replicas": 2, "command": [sys.executable, "-c", "import os, json; "
                                              "print('index', json.loads(os.environ['TF_CONFIG'])['task']['index'])"]},
    })
    result = tfcluster("up", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(tfcluster("status", "ok", "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "succeeded" and status["progress"]["loss"] == 0.25
    logs = tfcluster("logs", "ok", cwd=tmp_path).stdout
    assert "ok-worker-1 | index 1" in logs and "ok-worker-0 | index 0" in logs
    assert tfcluster("logs", "ok", "ok-worker-1", cwd=tmp_path).stdout.strip() == "index 1"
    assert (tmp_path / "tfcluster-runs" / "ok").is_dir()  # the local checkpoint dir
    assert_nothing_left(*processes("ok"))
    assert tfcluster("down", "ok", "--volumes", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "tfcluster-runs" / "ok").exists() and not LocalState.named("ok").root.exists()


def test_failed_job_exits_1_and_names_the_task(tmp_path: Path) -> None:
    script = "import sys; print('ValueError: bad shard', file=sys.stderr); sys.exit(2)"
    spec = write(tmp_path, "bad", {"chief": {"command": SLEEP}, "worker": {"command": [sys.executable, "-c", script]}},
                 restart={"max_restarts": 1})
    result = tfcluster("up", str(spec), cwd=tmp_path)
    assert result.returncode == 1
    status = json.loads(tfcluster("status", "bad", "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "failed" and status["restarts"] == 1
    assert "bad-worker-0" in status["message"] and "ValueError: bad shard" in status["message"]
    assert_nothing_left(*processes("bad"))


def test_detach_status_second_up_logs_and_down(tmp_path: Path) -> None:
    spec = write(tmp_path, "bg", {"chief": {"command": SLEEP}, "worker": {"replicas": 2, "command": SLEEP}})
    other = write(tmp_path, "bg2", {"worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    assert tfcluster("up", "-d", str(other), cwd=tmp_path).returncode == 0
    wait_running("bg", 3)
    again = tfcluster("up", "-d", str(spec), cwd=tmp_path)
    assert again.returncode == 1 and "already running" in again.stderr
    status = json.loads(tfcluster("status", "bg", "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "running" and [t["state"] for t in status["tasks"]] == ["running"] * 3
    ports = [t["port"] for n in ("bg", "bg2") for t in json.loads(LocalState.named(n).plan.read_text())["tasks"]]
    assert len(ports) == 4 and len(set(ports)) == 4, f"the two clusters' ports overlap: {ports}"
    assert "bg-worker-1 | serving" in tfcluster("logs", "bg", cwd=tmp_path).stdout
    for name in ("bg", "bg2"):
        left = processes(name)
        down = tfcluster("down", name, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert_nothing_left(*left)
    assert tfcluster("status", "bg", cwd=tmp_path).returncode == 1
    assert registry.lookup("bg") is None


def test_ctrl_c_on_up_stops_every_process_and_keeps_the_logs(tmp_path: Path) -> None:
    chatty = [sys.executable, "-c", "import time; print('task started', flush=True); time.sleep(60)"]
    spec = write(tmp_path, "intr", {"chief": {"command": chatty}, "worker": {"command": SLEEP}})
    up = subprocess.Popen([*CLI, "up", str(spec)], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_running("intr", 2)
    chief_log = LocalState.named("intr").task_log("intr-chief-0")
    wait_for(lambda: "task started" in chief_log.read_text())
    left = processes("intr")
    up.send_signal(signal.SIGINT)
    output, _ = up.communicate(timeout=30)
    assert up.returncode == 130, output
    assert_nothing_left(*left)
    assert "task started" in tfcluster("logs", "intr", "intr-chief-0", cwd=tmp_path).stdout
    status = json.loads(tfcluster("status", "intr", "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "cancelled"
    assert tfcluster("down", "intr", cwd=tmp_path).returncode == 0
    assert tfcluster("logs", "intr", cwd=tmp_path).returncode == 1


def wait_for(condition, timeout: float = 30) -> None:
    ends = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < ends, "timed out"
        time.sleep(0.05)


def test_down_never_kills_a_process_group_that_is_no_longer_the_clusters(tmp_path: Path) -> None:
    spec = write(tmp_path, "reuse", {"worker": {"command": [sys.executable, "-c", "pass"]}})
    assert tfcluster("up", str(spec), cwd=tmp_path).returncode == 0
    files = LocalState.named("reuse")
    wait_for(lambda: files.supervisor() is None)  # the supervisor's last word must not overwrite ours
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # stands for a reused group id
    try:
        write_json(files.groups, {"reuse-worker-0": {"pgid": stranger.pid, "log_offset": 0}})
        assert tfcluster("down", "reuse", cwd=tmp_path).returncode == 0
        assert stranger.poll() is None, "down killed a process that is not the cluster's"
    finally:
        stranger.kill()
        stranger.wait()


def test_logs_follow_ends_with_the_job(tmp_path: Path) -> None:
    script = "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)"
    spec = write(tmp_path, "tail", {"worker": {"command": [sys.executable, "-c", script]}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    followed = tfcluster("logs", "tail", "tail-worker-0", "-f", cwd=tmp_path, timeout=30)
    assert followed.stdout.split("\n")[:3] == ["line 0", "line 1", "line 2"]


def test_unknown_task_and_cluster_are_one_line_errors(tmp_path: Path) -> None:
    spec = write(tmp_path, "one", {"worker": {"command": [sys.executable, "-c", "pass"]}})
    assert tfcluster("up", str(spec), cwd=tmp_path).returncode == 0
    result = tfcluster("logs", "one", "one-worker-7", cwd=tmp_path)
    assert result.returncode == 1 and "no task 'one-worker-7'" in result.stderr and "Traceback" not in result.stderr
    result = tfcluster("down", "nope", cwd=tmp_path)
    assert result.returncode == 1 and "no local cluster named 'nope'" in result.stderr


def kill_supervisor(name: str) -> tuple[int, list[int]]:
    daemon, groups = processes(name)
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_for(lambda: LocalState.named(name).supervisor() is None)
    return daemon, groups


def status_json(name: str, tmp_path: Path) -> dict[str, Any]:
    return json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)


def test_a_killed_supervisor_is_reported_lost_and_down_removes_everything(tmp_path: Path) -> None:
    spec = write(tmp_path, "orphan", {"chief": {"command": SLEEP}, "worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running("orphan", 2)
    daemon, groups = kill_supervisor("orphan")
    status = status_json("orphan", tmp_path)
    assert status["supervisor"] == "lost" and "supervisor is gone" in status["message"], status
    assert status["state"] == "running" and [t["state"] for t in status["tasks"]] == ["running", "running"]
    assert "(supervisor lost)" in tfcluster("status", "orphan", cwd=tmp_path).stdout
    assert all(map(group_alive, groups)), "the tasks outlive their supervisor until `down` or `watch`"
    assert tfcluster("down", "orphan", cwd=tmp_path).returncode == 0
    assert_nothing_left(daemon, groups)


def test_watch_adopts_the_tasks_of_a_killed_supervisor_without_restarting_them(tmp_path: Path) -> None:
    chief = [sys.executable, "-c", "import time; print('chief up', flush=True); time.sleep(4)"]
    spec = write(tmp_path, "adopt", {"chief": {"command": chief}, "worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running("adopt", 2)
    daemon, groups = kill_supervisor("adopt")
    watched = tfcluster("watch", "adopt", cwd=tmp_path)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "a new one adopted the tasks" in watched.stdout and "adopt [local]: succeeded" in watched.stdout
    status = status_json("adopt", tmp_path)
    assert status["state"] == "succeeded" and status["supervisor"] == "exited" and status["restarts"] == 0
    assert [t["exit_code"] for t in status["tasks"]][0] == 0
    assert tfcluster("logs", "adopt", "adopt-chief-0", cwd=tmp_path).stdout.count("chief up") == 1, "the chief was restarted"
    assert_nothing_left(processes("adopt")[0], groups)
    assert_nothing_left(daemon, [])


@pytest.mark.parametrize("code, state", [(0, "succeeded"), (3, "failed")])
def test_a_run_that_ended_while_unsupervised_ends_with_its_true_state(tmp_path: Path, code: int, state: str) -> None:
    script = [sys.executable, "-c", f"import sys, time; time.sleep(2); sys.exit({code})"]
    spec = write(tmp_path, "gone", {"chief": {"command": script}, "worker": {"command": script}},
                 restart={"policy": "never"}, success_policy="all-workers")
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running("gone", 2)
    daemon, groups = kill_supervisor("gone")
    wait_for(lambda: all(t["exit_code"] == code for t in status_json("gone", tmp_path)["tasks"]), timeout=30)
    assert status_json("gone", tmp_path)["supervisor"] == "lost"
    watched = tfcluster("watch", "gone", cwd=tmp_path)
    assert watched.returncode == (0 if code == 0 else 1), watched.stdout
    status = status_json("gone", tmp_path)
    assert status["state"] == state and [t["exit_code"] for t in status["tasks"]] == [code, code], status
    if code:
        assert "gone-chief-0 exited with code 3" in status["message"]
    assert_nothing_left(daemon, groups)


def test_watch_reattaches_to_a_detached_cluster_and_exits_with_its_result(tmp_path: Path) -> None:
    ok = write(tmp_path, "att", {"worker": {"command": [sys.executable, "-c", "import time; time.sleep(1)"]}})
    assert tfcluster("up", "-d", str(ok), cwd=tmp_path).returncode == 0
    watched = tfcluster("watch", "att", cwd=tmp_path)
    assert watched.returncode == 0 and "att [local]: succeeded" in watched.stdout
    assert "`tfcluster tensorboard att`" in watched.stdout
    bad = write(tmp_path, "attf", {"worker": {"command": [sys.executable, "-c", "import sys; sys.exit(3)"]}},
                restart={"policy": "never"})
    assert tfcluster("up", "-d", str(bad), cwd=tmp_path).returncode == 0
    assert tfcluster("watch", "attf", cwd=tmp_path).returncode == 1


def test_up_refuses_a_cluster_that_clearly_exceeds_the_memory_unless_forced(tmp_path: Path) -> None:
    spec = write(tmp_path, "fat", {"worker": {"replicas": 2, "resources": {"memory": "100Ti"}, "command": SLEEP}})
    refused = tfcluster("up", "-d", str(spec), cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"{spec}:") and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "roles: the 2 tasks need at least 204800.0 GiB" in refused.stderr and "--force" in refused.stderr
    assert not LocalState.named("fat").root.exists(), "a refused launch left files"
    assert tfcluster("up", "-d", "--force", str(spec), cwd=tmp_path).returncode == 0
    wait_running("fat", 2)
    left = processes("fat")
    assert tfcluster("down", "fat", cwd=tmp_path).returncode == 0
    assert_nothing_left(*left)
