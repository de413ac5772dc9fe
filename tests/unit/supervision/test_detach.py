"""``launcher.supervision.detach``: a lean command forks its detached process, any other caller spawns one.

Each case runs in a Python of its own (declaring a process lean is for the process's life, and a fork of
pytest is what the module refuses to make); marker files order the steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.supervision import harness

#: The starting program: ``CASE`` is a dict of the case's knobs; it prints the started pid and, once the
#: detached process ended, what it reported (``report.json``, written by ``run``; absent when ``run`` never ran).
PROGRAM = r"""
import json, os, pathlib, sys, threading, time
from launcher.supervision import detach

case = json.loads(sys.argv[1])
work = pathlib.Path(case["dir"])
FROM_THE_PARENT = "state only a fork has"

if case.get("exit_handlers"):
    import atexit
    atexit.register(print, "the command's exit handler", file=sys.stderr)

def run():
    if case.get("exit_handlers"):
        atexit.register(print, "the fork's exit handler")
    (work / "running").touch()
    while not (work / "finish").exists():
        time.sleep(0.02)
    report = {"sid": os.getsid(0), "pid": os.getpid(), "cmdline": pathlib.Path("/proc/self/cmdline").read_bytes().decode(),
              "from_parent": FROM_THE_PARENT,
              "fds": [int(fd) for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]}
    (work / "report.json").write_text(json.dumps(report))
    print("run printed this")
    if case.get("raise"):
        raise RuntimeError("the body failed")
    return 0

if case["lean"]:
    detach.fork_from_this_process()
if case["thread"]:
    stay = threading.Event()
    threading.Thread(target=stay.wait, daemon=True).start()
read, write = os.pipe()  # a descriptor of the starting command's (its output pipe, say)
with open(work / "detached.log", "ab") as log:
    started = detach.start(case["argv"], log, run)
print(json.dumps({"pid": started.pid, "parent_sid": os.getsid(0)}), flush=True)
(work / "finish").touch()
deadline = time.monotonic() + 60
while not started.ended():
    assert time.monotonic() < deadline, "the detached process did not end"
    time.sleep(0.02)
"""

#: What ``argv`` runs when the case spawns: it records that it ran and how it was called.
SPAWNED = ("import json, os, pathlib, sys; pathlib.Path(sys.argv[1], 'spawned.json')"
           ".write_text(json.dumps({'argv': sys.argv, 'sid': os.getsid(0), 'pid': os.getpid()}))")


def start(tmp_path: Path, *, lean: bool, thread: bool = False, **knobs: object) -> tuple[dict[str, int], Path]:
    argv = [sys.executable, "-c", SPAWNED, str(tmp_path), "--marker"]
    case = {"dir": str(tmp_path), "lean": lean, "thread": thread, "argv": argv, **knobs}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(case)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), tmp_path


def test_a_lean_command_forks_a_process_named_by_argv_in_a_session_of_its_own(tmp_path: Path) -> None:
    started, work = start(tmp_path, lean=True)
    report = json.loads((work / "report.json").read_text())
    assert report["pid"] == started["pid"]
    assert report["from_parent"] == "state only a fork has"
    assert report["sid"] == started["pid"] != started["parent_sid"]
    assert report["cmdline"].startswith(f"{sys.executable} -c ") and f"{tmp_path} --marker" in report["cmdline"]
    assert sorted(report["fds"]) == [0, 1, 2]  # not the command's pipe, log or anything else it had open
    assert "run printed this" in (work / "detached.log").read_text()
    assert not (work / "spawned.json").exists()


@pytest.mark.parametrize(("lean", "thread"), [(False, False), (True, True)], ids=["not declared lean", "two threads"])
def test_any_other_caller_spawns_argv_in_a_session_of_its_own(tmp_path: Path, lean: bool, thread: bool) -> None:
    started, work = start(tmp_path, lean=lean, thread=thread)
    spawned = json.loads((work / "spawned.json").read_text())
    assert spawned["argv"][1:] == [str(tmp_path), "--marker"]
    assert spawned["pid"] == started["pid"] == spawned["sid"] != started["parent_sid"]
    assert not (work / "report.json").exists()


def test_a_forked_body_that_raises_leaves_its_traceback_in_the_log(tmp_path: Path) -> None:
    _, work = start(tmp_path, lean=True, **{"raise": True})
    log = (work / "detached.log").read_text()
    assert "run printed this" in log and "RuntimeError: the body failed" in log


def test_the_fork_runs_its_own_exit_handlers_not_the_commands(tmp_path: Path) -> None:
    """The fork runs the exit handlers it registered itself; the command's handlers (its temporary files) are the
    command's."""
    _, work = start(tmp_path, lean=True, exit_handlers=True)
    log = (work / "detached.log").read_text()
    assert "the fork's exit handler" in log and "the command's exit handler" not in log, log


#: A process that buffers a line on stdout and stderr, keeps a daemon thread writing to stderr, registers an exit
#: handler, then ends by ``end``.
ENDING = """
import atexit, sys, threading
from launcher.supervision.detach import end
atexit.register(lambda: print(" and the exit handler", end=""))
def chatter():
    while True:
        sys.stderr.write("follower line\\n")
threading.Thread(target=chatter, daemon=True).start()
print("last words", end="")
sys.stderr.write("last error")
end(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", [harness.LEFT_EXIT, 0, 1])
def test_end_keeps_the_code_runs_the_exit_handlers_and_flushes_while_a_daemon_thread_writes(code: int) -> None:
    """Without ``end`` the interpreter's finalization aborts this process (134: the thread holds stderr); ``end``
    skips it, so it runs the exit handlers and flushes stdout and stderr itself (buffered here: the environment's
    ``PYTHONUNBUFFERED`` is left out)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    result = subprocess.run([sys.executable, "-c", ENDING, str(code)], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == code and result.stdout == "last words and the exit handler", (result.returncode,
                                                                                             result.stderr[-300:])
    assert "last error" in result.stderr
