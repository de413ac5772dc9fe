"""``tfcluster up/status/logs/down`` on the local backend, as real commands in real shells.

Tasks are small Python scripts (command overrides), ordered by marker files
the test or another task creates (``helpers.gates``), never by sleeping.
After every test no process of the cluster may be left: the daemon and
every task's process group are checked with signal 0.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.gates import BLOCK, wait_for
from helpers.local_cluster import CLI, assert_nothing_left, processes, tfcluster, wait_status, write_spec
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from helpers.run_names import run_name
from helpers.task_events import print_event
from launcher.backends import tcmalloc
from launcher.backends.local.processes import group_alive
from launcher.backends.local.state import LocalState
from launcher.cli import registry
from launcher.supervision.statefile import write_json
from launcher.supervision.status import State

SLEEP = [sys.executable, "-c", f"print('serving', flush=True); {BLOCK}"]  # runs until stopped


def script(source: str) -> list[str]:
    return [sys.executable, "-c", source]


def write(tmp_path: Path, name: str, roles: dict[str, Any], **fields: Any) -> Path:
    return write_spec(tmp_path, {"name": name, "roles": roles, **fields})


def wait_running(name: str, tasks: int) -> None:
    wait_status(name, lambda s: s.state is State.RUNNING and len(LocalState.named(name).read_groups()) == tasks, 30)


def test_up_runs_to_success_and_keeps_logs(tmp_path: Path) -> None:
    name = run_name("ok")
    event = print_event(f'{{"event":"epoch","task":"{name}-chief-0","time":0,"epoch":1,"step":4,"metrics":{{"loss":0.25}}}}')
    index = "json.loads(os.environ['TF_CONFIG'])['task']['index']"
    spec = write(tmp_path, name, {  # the chief ends once both workers have printed
        "chief": {"command": script(f"{event}\n{wait_for(tmp_path / 'printed-0')}\n{wait_for(tmp_path / 'printed-1')}")},
        "worker": {"replicas": 2, "command": script(f"import os, json, pathlib; print('index', {index}, flush=True); "
                                                    f"pathlib.Path({str(tmp_path)!r}, 'printed-' + str({index})).touch()")},
    })
    result = tfcluster("up", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "succeeded" and status["progress"]["loss"] == 0.25
    logs = tfcluster("logs", name, cwd=tmp_path).stdout
    assert f"{name}-worker-1 | index 1" in logs and f"{name}-worker-0 | index 0" in logs
    assert tfcluster("logs", name, f"{name}-worker-1", cwd=tmp_path).stdout.strip() == "index 1"
    assert (tmp_path / "tfcluster-runs" / name).is_dir()  # the local checkpoint dir
    assert_nothing_left(*processes(name))
    assert tfcluster("down", name, "--volumes", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "tfcluster-runs" / name).exists() and not LocalState.named(name).root.exists()


def test_failed_job_exits_1_and_names_the_task(tmp_path: Path) -> None:
    name = run_name("bad")
    script = "import sys; print('ValueError: bad shard', file=sys.stderr); sys.exit(2)"
    spec = write(tmp_path, name, {"chief": {"command": SLEEP}, "worker": {"command": [sys.executable, "-c", script]}},
                 restart={"max_restarts": 1})
    result = tfcluster("up", str(spec), cwd=tmp_path)
    assert result.returncode == 1
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "failed" and status["restarts"] == 1
    assert f"{name}-worker-0" in status["message"] and "ValueError: bad shard" in status["message"]
    assert_nothing_left(*processes(name))


def test_detach_status_second_up_logs_and_down(tmp_path: Path) -> None:
    name, other_name = run_name("bg"), run_name("bg2")
    spec = write(tmp_path, name, {"chief": {"command": SLEEP}, "worker": {"replicas": 2, "command": SLEEP}})
    other = write(tmp_path, other_name, {"worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    assert tfcluster("up", "-d", str(other), cwd=tmp_path).returncode == 0
    wait_running(name, 3)
    again = tfcluster("up", "-d", str(spec), cwd=tmp_path)
    assert again.returncode == 1 and "already running" in again.stderr
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "running" and [t["state"] for t in status["tasks"]] == ["running"] * 3
    ports = [t["port"] for n in (name, other_name) for t in json.loads(LocalState.named(n).files.plan.read_text())["tasks"]]
    assert len(ports) == 4 and len(set(ports)) == 4, f"the two clusters' ports overlap: {ports}"
    assert f"{name}-worker-1 | serving" in tfcluster("logs", name, cwd=tmp_path).stdout
    for each in (name, other_name):
        left = processes(each)
        down = tfcluster("down", each, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert_nothing_left(*left)
    assert tfcluster("status", name, cwd=tmp_path).returncode == 1
    assert registry.lookup(name) is None


def test_ctrl_c_on_up_stops_every_process_and_keeps_the_logs(tmp_path: Path) -> None:
    name = run_name("intr")
    chatty = script(f"print('task started', flush=True); {BLOCK}")
    spec = write(tmp_path, name, {"chief": {"command": chatty}, "worker": {"command": SLEEP}})
    up = subprocess.Popen([*CLI, "up", str(spec)], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_running(name, 2)
    wait_for_condition(LocalState.named(name).started.exists)  # every task ran: Ctrl-C now stops, keeping the logs
    chief_log = LocalState.named(name).task_log(f"{name}-chief-0")
    wait_for_condition(lambda: "task started" in chief_log.read_text())
    left = processes(name)
    up.send_signal(signal.SIGINT)
    output, _ = up.communicate(timeout=30)
    assert up.returncode == 130, output
    assert_nothing_left(*left)
    assert "task started" in tfcluster("logs", name, f"{name}-chief-0", cwd=tmp_path).stdout
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "cancelled"
    assert tfcluster("down", name, cwd=tmp_path).returncode == 0
    assert tfcluster("logs", name, cwd=tmp_path).returncode == 1


def test_down_never_kills_a_process_group_that_is_no_longer_the_clusters(tmp_path: Path) -> None:
    spec = write(tmp_path, "reuse", {"worker": {"command": [sys.executable, "-c", "pass"]}})
    assert tfcluster("up", str(spec), cwd=tmp_path).returncode == 0
    files = LocalState.named("reuse")
    wait_for_condition(lambda: files.supervisor() is None)  # the supervisor's last word must not overwrite ours
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # stands for a reused group id
    try:
        write_json(files.groups, {"reuse-worker-0": {"pgid": stranger.pid, "log_offset": 0}})
        assert tfcluster("down", "reuse", cwd=tmp_path).returncode == 0
        assert stranger.poll() is None, "down killed a process that is not the cluster's"
    finally:
        stranger.kill()
        stranger.wait()


def test_logs_follow_ends_with_the_job(tmp_path: Path) -> None:
    go = tmp_path / "go"  # the rest is written only once the follower has shown the first line
    source = f"print('line 0', flush=True)\n{wait_for(go)}\nprint('line 1', flush=True); print('line 2', flush=True)"
    spec = write(tmp_path, "tail", {"worker": {"command": script(source)}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    follow = subprocess.Popen([*CLI, "logs", "tail", "tail-worker-0", "-f"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert follow.stdout is not None and follow.stdout.readline() == "line 0\n"
    go.touch()
    rest, _ = follow.communicate(timeout=60)
    assert follow.returncode == 0 and rest.split("\n")[:2] == ["line 1", "line 2"]


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
    wait_for_condition(lambda: LocalState.named(name).supervisor() is None)
    return daemon, groups


def status_json(name: str, tmp_path: Path) -> dict[str, Any]:
    return json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)


def test_a_killed_supervisor_is_reported_lost_and_down_removes_everything(tmp_path: Path) -> None:
    name = run_name("orphan")
    spec = write(tmp_path, name, {"chief": {"command": SLEEP}, "worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running(name, 2)
    daemon, groups = kill_supervisor(name)
    status = status_json(name, tmp_path)
    assert status["supervisor"] == "lost" and "supervisor is gone" in status["message"], status
    assert status["state"] == "running" and [t["state"] for t in status["tasks"]] == ["running", "running"]
    assert "(supervisor lost)" in tfcluster("status", name, cwd=tmp_path).stdout
    assert all(map(group_alive, groups)), "the tasks outlive their supervisor until `down` or `watch`"
    assert tfcluster("down", name, cwd=tmp_path).returncode == 0
    assert not [pgid for pgid in groups if group_alive(pgid)], "down returned before the tasks it killed were gone"
    assert_nothing_left(daemon, groups)


def test_watch_adopts_the_tasks_of_a_killed_supervisor_without_restarting_them(tmp_path: Path) -> None:
    name = run_name("adopt")
    go = tmp_path / "go"  # the chief ends once the new supervisor has adopted it
    spec = write(tmp_path, name, {"chief": {"command": script(f"print('chief up', flush=True)\n{wait_for(go)}")},
                                  "worker": {"command": SLEEP}})
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running(name, 2)
    daemon, groups = kill_supervisor(name)
    watch = subprocess.Popen([*CLI, "watch", name], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_condition(lambda: status_json(name, tmp_path)["supervisor"] == "alive")
    go.touch()
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 0, stdout + stderr
    assert "a new one adopted the tasks" in stdout and f"{name} [local]: succeeded" in stdout
    status = status_json(name, tmp_path)
    assert status["state"] == "succeeded" and status["supervisor"] == "exited" and status["restarts"] == 0
    assert [t["exit_code"] for t in status["tasks"]][0] == 0
    assert tfcluster("logs", name, f"{name}-chief-0", cwd=tmp_path).stdout.count("chief up") == 1, "the chief was restarted"
    assert_nothing_left(processes(name)[0], groups)
    assert_nothing_left(daemon, [])


@pytest.mark.parametrize("code, state", [(0, "succeeded"), (3, "failed")])
def test_a_run_that_ended_while_unsupervised_ends_with_its_true_state(tmp_path: Path, code: int, state: str) -> None:
    name = run_name("gone")
    go = tmp_path / "go"  # the tasks end once their supervisor is gone
    task = script(f"{wait_for(go)}\nsys.exit({code})")
    spec = write(tmp_path, name, {"chief": {"command": task}, "worker": {"command": task}},
                 restart={"policy": "never"}, success_policy="all-workers")
    assert tfcluster("up", "-d", str(spec), cwd=tmp_path).returncode == 0
    wait_running(name, 2)
    daemon, groups = kill_supervisor(name)
    go.touch()
    wait_for_condition(lambda: all(t["exit_code"] == code for t in status_json(name, tmp_path)["tasks"]), timeout=30)
    assert status_json(name, tmp_path)["supervisor"] == "lost"
    watched = tfcluster("watch", name, cwd=tmp_path)
    assert watched.returncode == (0 if code == 0 else 1), watched.stdout
    status = status_json(name, tmp_path)
    assert status["state"] == state and [t["exit_code"] for t in status["tasks"]] == [code, code], status
    if code:
        assert f"{name}-chief-0 exited with code 3" in status["message"]
    assert_nothing_left(daemon, groups)


def test_watch_reattaches_to_a_detached_cluster_and_exits_with_its_result(tmp_path: Path) -> None:
    ok = write(tmp_path, "att", {"worker": {"command": script(wait_for(tmp_path / "go"))}})
    assert tfcluster("up", "-d", str(ok), cwd=tmp_path).returncode == 0
    wait_running("att", 1)
    (tmp_path / "go").touch()  # the worker ends once the cluster runs detached
    watched = tfcluster("watch", "att", cwd=tmp_path)
    assert watched.returncode == 0 and "att [local]: succeeded" in watched.stdout
    assert "`tfcluster tensorboard att`" in watched.stdout
    bad = write(tmp_path, "attf", {"worker": {"command": [sys.executable, "-c", "import sys; sys.exit(3)"]}},
                restart={"policy": "never"})
    assert tfcluster("up", "-d", str(bad), cwd=tmp_path).returncode == 0
    assert tfcluster("watch", "attf", cwd=tmp_path).returncode == 1


def test_up_refuses_a_cluster_that_clearly_exceeds_the_memory_unless_forced(tmp_path: Path) -> None:
    name = run_name("fat")
    spec = write(tmp_path, name, {"worker": {"replicas": 2, "resources": {"memory": "100Ti"}, "command": SLEEP}})
    refused = tfcluster("up", "-d", str(spec), cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"{spec}:") and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "roles: the 2 tasks need at least 204800.0 GiB" in refused.stderr and "--force" in refused.stderr
    assert not LocalState.named(name).root.exists(), "a refused launch left files"
    assert tfcluster("up", "-d", "--force", str(spec), cwd=tmp_path).returncode == 0
    wait_running(name, 2)
    left = processes(name)
    assert tfcluster("down", name, cwd=tmp_path).returncode == 0
    assert_nothing_left(*left)


def user_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (not following links), by relative path, with its content."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("place", ["working directory", "symlink to it", "home directory", "existing dir"])
def test_down_volumes_refuses_a_checkpoint_dir_tfcluster_did_not_create_and_keeps_every_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, place: str) -> None:
    home = tmp_path / "home"
    project = home / "project"
    for relative in ("train.py", "data/train.csv", ".env", "ckpt/mine.txt"):
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(f"the user's {relative}\n")
    (home / ".bashrc").write_text("the user's shell\n")
    (project / "here").symlink_to(project)
    monkeypatch.setenv("HOME", str(home))
    directory = {"working directory": ".", "symlink to it": "here", "home directory": str(home),
                 "existing dir": "ckpt"}[place]
    spec = write(project, "mine", {"chief": {"command": [sys.executable, "-c", "pass"]}}, checkpoint={"dir": directory})
    before = user_files(home)
    assert tfcluster("up", str(spec), cwd=project).returncode == 0
    refused = tfcluster("down", "mine", "--volumes", cwd=project)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and refused.stderr.startswith("checkpoint.dir: ")
    assert "without --volumes" in refused.stderr and "Traceback" not in refused.stderr
    assert LocalState.named("mine").exists(), "a refused down must do nothing"
    assert tfcluster("down", "mine", cwd=project).returncode == 0
    assert {k: v for k, v in user_files(home).items() if k in before} == before


def test_down_volumes_deletes_the_dir_up_created_also_on_a_later_run(tmp_path: Path) -> None:
    spec = write(tmp_path, "again", {"chief": {"command": [sys.executable, "-c", "pass"]}},
                 checkpoint={"dir": "runs/a/ckpt"})
    for _ in range(2):  # the second up finds the dir the first made (and marked)
        assert tfcluster("up", str(spec), cwd=tmp_path).returncode == 0
        assert (tmp_path / "runs/a/ckpt").is_dir()
    assert tfcluster("down", "again", "--volumes", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "runs/a/ckpt").exists() and (tmp_path / "runs/a").is_dir()  # only what was marked


def test_tasks_run_with_tcmalloc_unless_their_spec_clears_the_preload(tmp_path: Path) -> None:
    if not tcmalloc.preload_env(environ={}):
        unavailable(f"{tcmalloc.LIBRARY} is not installed (Debian: libtcmalloc-minimal4; scripts/setup-venv.sh)")
    mapped = script("print('tcmalloc', any('libtcmalloc_minimal' in line for line in open('/proc/self/maps')))")
    spec = write(tmp_path, "malloc", {"chief": {"command": mapped},
                                      "worker": {"command": mapped, "env": {"LD_PRELOAD": ""}}})
    result = tfcluster("up", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert tfcluster("logs", "malloc", "malloc-chief-0", cwd=tmp_path).stdout.strip() == "tcmalloc True"
    assert tfcluster("logs", "malloc", "malloc-worker-0", cwd=tmp_path).stdout.strip() == "tcmalloc False"
    assert tfcluster("down", "malloc", cwd=tmp_path).returncode == 0


def test_the_controller_files_are_private_to_their_owner(tmp_path: Path) -> None:
    home = Path(os.environ["TFCLUSTER_HOME"])
    home.mkdir(mode=0o755, exist_ok=True)
    home.chmod(0o755)  # the user's (maybe shared) directory: kept as it is
    (home / "local").mkdir(mode=0o755)
    (home / "local").chmod(0o755)  # as an older version left it: tightened on write
    secret = 'import os; print(os.environ["API_TOKEN"])'
    spec = write(tmp_path, "priv", {"chief": {"command": [sys.executable, "-c", secret]}}, env={"API_TOKEN": "s3cr3t"})
    assert tfcluster("up", str(spec), cwd=tmp_path).returncode == 0
    state = LocalState.named("priv")
    assert "s3cr3t" in state.task_log("priv-chief-0").read_text() and "s3cr3t" in state.files.plan.read_text()
    entries = list(home.rglob("*"))
    assert state.exits in entries and state.task_log("priv-chief-0") in entries and (home / "clusters") in entries
    modes = {str(p.relative_to(home)): oct(p.stat().st_mode & 0o777) for p in entries}
    assert modes == {name: oct(0o700 if (home / name).is_dir() else 0o600) for name in modes}
    assert oct(home.stat().st_mode & 0o777) == oct(0o755)


#: A user's program that never imports launcher: it blocks in a function of its own until its fifo's writer closes.
BLOCKED_ON_A_PEER = """import sys


def wait_for_the_peer(fifo):
    with open(fifo) as pipe:  # blocks until the test opens the write end, then reads until it closes it
        return pipe.read()


wait_for_the_peer(sys.argv[1])
"""


def open_writer(fifo: Path, timeout: float = 60) -> int:
    """The write end of ``fifo``, once its reader has it open (the task blocks in its read); polled, bounded."""
    ends = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: no reader yet
            assert exc.errno == errno.ENXIO and time.monotonic() < ends, exc
            time.sleep(0.05)


def test_debug_reads_the_stacks_of_a_users_program_without_the_handler_with_py_spy(tmp_path: Path) -> None:
    """The chief is a plain Python script, the worker not Python at all (``cat``): one dump, one clear line."""
    name = run_name("spy")
    source = tmp_path / "blocked.py"
    source.write_text(BLOCKED_ON_A_PEER)
    fifos = [tmp_path / "chief.fifo", tmp_path / "worker.fifo"]
    for fifo in fifos:
        os.mkfifo(fifo)
    spec = write(tmp_path, name, {"chief": {"command": [sys.executable, str(source), str(fifos[0])]},
                                  "worker": {"command": ["cat", str(fifos[1])]}})
    assert tfcluster("up", "--detach", str(spec), cwd=tmp_path).returncode == 0
    writers: list[int] = []
    try:
        writers = [open_writer(fifo) for fifo in fifos]  # both tasks now block in their reads
        result = tfcluster("debug", name, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        chief, worker = result.stdout.split("== ")[1:]
        assert chief.splitlines()[0] == f"{name}-chief-0" and worker.splitlines()[0] == f"{name}-worker-0", result.stdout
        assert re.search(rf"^ +wait_for_the_peer \({re.escape(str(source))}:6\)$", chief, re.MULTILINE), chief
        assert re.search(rf"^ +<module> \({re.escape(str(source))}:9\)$", chief, re.MULTILINE), chief
        assert worker.splitlines()[1].startswith("(no stacks"), worker
        assert f"no stacks of {name}-worker-0: not a Python program" in result.stderr, result.stderr
        assert wait_status(name, lambda s: True, timeout=5).state is State.RUNNING  # reading stopped nothing
    finally:
        for writer in writers:
            os.close(writer)  # the readers see the end of their input: the job ends
    assert wait_status(name, lambda s: s.state.terminal, timeout=60).state is State.SUCCEEDED
    left = processes(name)
    assert tfcluster("down", name, cwd=tmp_path).returncode == 0
    assert_nothing_left(*left)
