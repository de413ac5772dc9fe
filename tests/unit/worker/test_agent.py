"""A Kubernetes task's agent (``launcher.worker.agent``) with real child processes: every forwarded signal reaches
the program, the program's exit code (128+N for a signal) is the agent's, and its stack endpoint gives py-spy's
dump of the program (a grandchild too, its main thread spinning with the GIL held) to the run's token only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from helpers.boards import free_port
from helpers.paths import REPO
from helpers.required import unavailable
from launcher.protocol.env import EVENT_TOKEN
from launcher.protocol.pyspy_command import pyspy_binary
from launcher.protocol.stack_endpoint import STACKS_PORT, ask
from launcher.worker.agent import FORWARDED, NOT_FOUND, descendants

TOKEN = "0123456789abcdef0123456789abcdef"
#: The longest a test waits for a process to answer (never reached when it works).
PATIENCE = 30.0


def agent(program: str, *, shell: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The agent running ``python -c program`` (under ``sh -c``, which stays its parent, when ``shell``), in a
    process group of its own that its program shares (``processes`` ends the whole group)."""
    command = [sys.executable, "-c", program]
    if shell:
        command = ["sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, program]
    return subprocess.Popen([sys.executable, "-m", "launcher.worker.agent", "--", *command], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
                            start_new_session=True)


def ready(process: subprocess.Popen[str]) -> str:
    """The program's first line (it prints it once its handlers are in place)."""
    assert process.stdout is not None
    return process.stdout.readline().strip()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """The agents a test started; each one's whole process group is killed after it: a SIGKILLed agent forwards
    nothing, and its program (a GIL spinner takes a core) would outlive the test."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.parametrize("signum", FORWARDED, ids=lambda s: signal.Signals(s).name)
def test_every_forwarded_signal_reaches_the_program_and_its_exit_code_comes_back(
        signum: signal.Signals, processes: list[subprocess.Popen[str]]) -> None:
    program = textwrap.dedent(f"""
        import signal, sys, threading
        def handled(number, frame):
            print("got", signal.Signals(number).name, flush=True)
            sys.exit(7)
        signal.signal({int(signum)}, handled)
        print("ready", flush=True)
        threading.Event().wait()
    """)
    process = agent(program)
    processes.append(process)
    assert ready(process) == "ready"
    process.send_signal(signum)
    out, _ = process.communicate(timeout=PATIENCE)
    assert out.strip() == f"got {signum.name}"
    assert process.returncode == 7


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGKILL, 137)])
def test_a_program_ended_by_a_signal_ends_the_agent_with_128_plus_it(
        signum: signal.Signals, code: int, processes: list[subprocess.Popen[str]]) -> None:
    """SIGTERM sent to the agent (the kubelet's, through tini) ends a program without a handler: 143, what the
    supervisor reads as preempted; SIGKILL of the program itself (the OOM killer): 137."""
    process = agent("import os, threading; print(os.getpid(), flush=True); threading.Event().wait()")
    processes.append(process)
    child = int(ready(process))
    os.kill(process.pid if signum is signal.SIGTERM else child, signum)
    assert process.wait(timeout=PATIENCE) == code


def test_the_programs_own_exit_code_is_the_agents_and_a_missing_program_is_127(
        processes: list[subprocess.Popen[str]]) -> None:
    process = agent("raise SystemExit(5)")
    processes.append(process)
    assert process.wait(timeout=PATIENCE) == 5
    missing = subprocess.run([sys.executable, "-m", "launcher.worker.agent", "--", "/nonexistent/program"], cwd=REPO,
                             capture_output=True, text=True, timeout=PATIENCE)
    assert missing.returncode == NOT_FOUND
    assert missing.stderr.count("\n") == 1 and "/nonexistent/program" in missing.stderr


def asked(port: int, token: str) -> tuple[str | None, str]:
    """``ask`` until the agent listens (it binds right after starting its child)."""
    ends = time.monotonic() + PATIENCE
    while True:
        dump, why = ask("127.0.0.1", port, token)
        if dump is not None or "did not answer" not in why or time.monotonic() > ends:
            return dump, why


def test_the_endpoint_gives_py_spys_dump_of_a_grandchild_spinning_with_the_gil_to_the_runs_token_only(
        processes: list[subprocess.Popen[str]]) -> None:
    """The program runs under ``sh -c`` (its parent: not Python) and its main thread never lets go of the GIL, so
    no thread of its own could answer; the agent reads it from outside."""
    if pyspy_binary() is None:
        unavailable("py-spy is not installed (it is a dependency of tfcluster: pip install -e .)")
    port = free_port()
    program = textwrap.dedent("""
        def spin_holding_the_gil():
            print("ready", flush=True)
            while True:
                pass
        spin_holding_the_gil()
    """)
    process = agent(program, shell=True, env={STACKS_PORT: str(port), EVENT_TOKEN: TOKEN})
    processes.append(process)
    assert ready(process) == "ready"
    dump, why = asked(port, "another run's token")
    assert dump is None and "gave nothing" in why, why
    dump, why = asked(port, TOKEN)
    assert dump is not None, why
    assert "spin_holding_the_gil" in dump, dump


def test_descendants_are_the_process_and_every_one_below_it(processes: list[subprocess.Popen[str]]) -> None:
    process = agent("import os, threading; print(os.getpid(), flush=True); threading.Event().wait()", shell=True)
    processes.append(process)
    program = int(ready(process))
    found = descendants(process.pid)
    assert found[0] == process.pid and program in found and len(found) == 3  # the agent, sh, the program
    assert os.getpid() not in found
