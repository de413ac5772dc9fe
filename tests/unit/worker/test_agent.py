"""A Kubernetes task's agent (``launcher.worker.agent``) with real child processes: every forwarded signal reaches
the program, the program's exit code (128+N for a signal) is the agent's, and its stack endpoint gives py-spy's
dump of the program (a grandchild too, its main thread spinning with the GIL held) to the run's token only. A held
agent (its endpoint served) outlives a run, says its end in its log, and stops, starts (in its standby) and quits
on the supervisor's requests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.boards import free_port
from helpers.paths import REPO
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from launcher.protocol import agent_control
from launcher.protocol.agent_control import AgentState
from launcher.protocol.endpoint_wire import STACKS_HOST, STACKS_PORT
from launcher.protocol.env import EVENT_TOKEN
from launcher.protocol.pyspy_command import pyspy_binary
from launcher.protocol.stack_endpoint import Control, ask, order
from launcher.worker.agent import FORWARDED, NOT_FOUND, descendants, oom_kills

TOKEN = "0123456789abcdef0123456789abcdef"
#: The longest a test waits for a process to answer (never reached when it works).
PATIENCE = 30.0


def agent(program: str, *, shell: bool = False, env: dict[str, str] | None = None,
          standby: str | None = None) -> subprocess.Popen[str]:
    """The agent running ``python -c program`` (under ``sh -c``, which stays its parent, when ``shell``), in a
    process group of its own that its program shares (``processes`` ends the whole group); with ``standby``, that
    program (``python -c``) as its standby."""
    command = [sys.executable, "-c", program]
    if shell:
        command = ["sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, program]
    options = [] if standby is None else [agent_control.STANDBY_OPTION, json.dumps([sys.executable, "-c", standby])]
    return subprocess.Popen([sys.executable, "-m", "launcher.worker.agent", *options, "--", *command], cwd=REPO,
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


#: The agent run in-process: once its program is ready (a line on the agent's stdin says so) and its main thread
#: waits (it released the lock it holds from the start of the first run), a thread of its own sends itself SIGUSR2,
#: so the signal's C handler runs outside the main thread, whose wait no signal interrupts (as when the signal came
#: just before the main thread blocked: the flake).
SIGNAL_OFF_THE_MAIN_THREAD = """
import signal, sys, threading
from launcher.worker import agent
class Agent(agent.Agent):
    def _began(self, child):
        super()._began(child)
        threading.Thread(target=self.signal_once_waiting, daemon=True).start()
    def signal_once_waiting(self):
        sys.stdin.readline()
        with self.cond:  # the main thread holds it from before the run began until it waits
            pass
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR2)
agent.Agent = Agent
sys.exit(agent.run([sys.executable, "-c", sys.argv[1]], environ={}))
"""


def test_a_signal_whose_handler_ran_outside_the_main_threads_wait_still_reaches_the_program(
        processes: list[subprocess.Popen[str]]) -> None:
    program = textwrap.dedent("""
        import signal, sys, threading
        def handled(number, frame):
            print("got", signal.Signals(number).name, flush=True)
            sys.exit(7)
        signal.signal(signal.SIGUSR2, handled)
        print("ready", flush=True)
        threading.Event().wait()
    """)
    process = subprocess.Popen([sys.executable, "-c", SIGNAL_OFF_THE_MAIN_THREAD, program], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    processes.append(process)
    assert ready(process) == "ready" and process.stdin is not None
    process.stdin.write("signal now\n")
    process.stdin.flush()
    out, _ = process.communicate(timeout=PATIENCE)
    assert (out.strip(), process.returncode) == ("got SIGUSR2", 7)


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


def test_a_groups_run_is_the_leaders_group_but_the_leader_and_the_leader_once_alone() -> None:
    """A zygote's run: its standby leads a process group that the forked task joined (a child of another process):
    the run's processes are the group's other members and what is below them; a group with its leader alone (the
    zygote ended before it forked: the standby became the task itself) is the leader."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], process_group=0)
    alone = subprocess.Popen(["sleep", "60"], process_group=0)
    try:
        members = wait_for_members(leader.pid, 2)
        assert descendants(leader.pid, group=True) == members and leader.pid not in members
        assert descendants(alone.pid, group=True) == [alone.pid]
    finally:
        for process in (leader, alone):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for_members(pgid: int, count: int) -> list[int]:
    """The other members of process group ``pgid`` (here, its leader's children), once there are ``count``."""

    def members() -> list[int]:
        return sorted(pid for pid in descendants(pgid) if pid != pgid and os.getpgid(pid) == pgid)

    wait_for_condition(lambda: len(members()) == count, PATIENCE)
    return members()


def held(program: str, **kwargs: str) -> tuple[subprocess.Popen[str], int]:
    """A held agent (its endpoint served on a port of its own) running ``program``, and that port."""
    port = free_port()
    return agent(program, env={STACKS_PORT: str(port), EVENT_TOKEN: TOKEN}, **kwargs), port


def told(port: int, control: Control) -> AgentState:
    """The agent's answer to ``control``, asked until it listens (it binds right after starting its first run)."""
    ends = time.monotonic() + PATIENCE
    while True:
        state, why = order("127.0.0.1", port, control)
        if state is not None:
            return state
        assert "did not answer" in why and time.monotonic() < ends, why


def exit_line(process: subprocess.Popen[str]) -> AgentState:
    """The agent's next line, which must say a run ended."""
    state = agent_control.read_exit(ready(process), TOKEN)
    assert state is not None
    return state


#: A program that says it is ready, saves on SIGTERM (exit 0), and waits.
SAVES_ON_SIGTERM = textwrap.dedent("""
    import signal, sys, threading
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    threading.Event().wait()
""")


def test_a_held_agent_outlives_a_failed_run_says_so_and_runs_the_program_again_in_the_same_process(
        processes: list[subprocess.Popen[str]]) -> None:
    process, port = held("import os; print('run', os.getppid(), flush=True); raise SystemExit(3)")
    processes.append(process)
    assert ready(process) == f"run {process.pid}"
    assert exit_line(process) == AgentState(run=1, exit_code=3)
    assert told(port, agent_control.Status(token=TOKEN)) == AgentState(run=1, exit_code=3)
    assert process.poll() is None
    assert told(port, agent_control.Start(token=TOKEN)) == AgentState(run=2, started=True)
    assert ready(process) == f"run {process.pid}"  # the same agent: the same pod, on Kubernetes
    assert exit_line(process) == AgentState(run=2, exit_code=3)
    assert told(port, agent_control.Quit(token=TOKEN)).run == 2
    assert process.wait(timeout=PATIENCE) == 3


def test_stop_gives_sigterm_then_sigkill_once_the_grace_passed_and_start_is_refused_while_a_run_is_under_way(
        processes: list[subprocess.Popen[str]]) -> None:
    process, port = held(SAVES_ON_SIGTERM)
    processes.append(process)
    assert ready(process) == "ready"
    assert told(port, agent_control.Start(token=TOKEN)) == AgentState(run=1)  # not started: run 1 is under way
    assert told(port, agent_control.Quit(token=TOKEN)) == AgentState(run=1)  # nor quit
    assert told(port, agent_control.Stop(token=TOKEN, grace_seconds=PATIENCE)) == AgentState(run=1, exit_code=0)
    assert exit_line(process) == AgentState(run=1, exit_code=0)
    stubborn = "import signal, threading; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True)"
    process, port = held(stubborn + "; threading.Event().wait()")
    processes.append(process)
    assert ready(process) == "ready"
    assert told(port, agent_control.Stop(token=TOKEN, grace_seconds=0.1)) == AgentState(run=1, exit_code=137)


def test_the_next_run_becomes_the_standby_and_a_new_standby_is_kept_for_the_one_after(
        processes: list[subprocess.Popen[str]]) -> None:
    """The standby is called by a line on its stdin naming where it writes (the agent's stdout)."""
    standby = "import sys; where = sys.stdin.readline().strip(); print('standby became the run', where, flush=True)"
    process, port = held("print('first run', flush=True)", standby=standby)
    processes.append(process)
    assert ready(process) == "first run"
    assert exit_line(process) == AgentState(run=1, exit_code=0)
    for run in (2, 3):
        assert told(port, agent_control.Start(token=TOKEN)) == AgentState(run=run, started=True)
        assert ready(process) == "standby became the run /dev/stdout"
        assert exit_line(process) == AgentState(run=run, exit_code=0)


def test_a_held_agent_ends_on_sigterm_as_its_run_did_and_another_runs_token_gets_no_state(
        processes: list[subprocess.Popen[str]]) -> None:
    process, port = held(SAVES_ON_SIGTERM)
    processes.append(process)
    assert ready(process) == "ready"
    state, why = order("127.0.0.1", port, agent_control.Status(token="another run's token"))
    assert state is None and "gave no state" in why
    process.send_signal(signal.SIGTERM)  # the kubelet's, through tini: the pod is deleted
    assert exit_line(process) == AgentState(run=1, exit_code=0)
    assert process.wait(timeout=PATIENCE) == 0


def test_the_oom_kills_are_the_cgroups_count_v2_or_v1_and_none_where_unknown(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    assert oom_kills([v2, v1]) == 0
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert oom_kills([v2, v1]) == 2
    v2.write_text("low 0\nhigh 0\nmax 4\noom 3\noom_kill 3\noom_group_kill 0\n")
    assert oom_kills([v2, v1]) == 3


def relayed(port: int, request: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    """``launcher.worker.agent_relay`` with ``request``, in an environment like a compose task container's."""
    env = {**os.environ, STACKS_PORT: str(port), EVENT_TOKEN: token}
    return subprocess.run([sys.executable, "-m", "launcher.worker.agent_relay", request], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=PATIENCE)


def test_the_relay_asks_the_agent_with_the_containers_token_never_one_from_its_command_line(
        processes: list[subprocess.Popen[str]]) -> None:
    """What ``docker exec`` runs for a compose supervisor: the request's JSON without its token as its argument, the
    token taken from the container's environment; a token given on the command line is not the one sent."""
    process, port = held(SAVES_ON_SIGTERM)
    processes.append(process)
    assert ready(process) == "ready"
    status = relayed(port, '{"kind": "status"}')
    assert (status.returncode, AgentState.model_validate_json(status.stdout)) == (0, AgentState(run=1))
    stopped = relayed(port, agent_control.Stop(token=TOKEN, grace_seconds=5).model_dump_json(exclude={"token"}))
    assert AgentState.model_validate_json(stopped.stdout) == AgentState(run=1, exit_code=0)
    assert exit_line(process) == AgentState(run=1, exit_code=0)
    forged = relayed(port, json.dumps({"kind": "start", "token": TOKEN}), token="another run's")
    assert (forged.returncode, forged.stdout, forged.stderr) == (0, "", "")  # refused: the caller reads no state
    started = relayed(port, '{"kind": "start"}')
    assert AgentState.model_validate_json(started.stdout) == AgentState(run=2, started=True)
    assert ready(process) == "ready"
    if pyspy_binary() is not None:  # py-spy is tfcluster's dependency: the endpoint's own test requires it
        stacks = relayed(port, '{"kind": "stacks"}')
        assert stacks.returncode == 0 and "wait" in stacks.stdout, stacks.stderr
    assert relayed(port, '{"kind": "reboot"}').stdout == ""  # the agent refuses what is no request
    for bad in ("not json", "[]", '{"grace_seconds": 1}', json.dumps({"kind": "x" * 300})):
        refused = relayed(port, bad)
        assert (refused.returncode, refused.stdout) == (2, "") and "usage" in refused.stderr
    gone = relayed(free_port(), '{"kind": "status"}')
    assert gone.returncode == 1 and "did not answer" in gone.stderr and gone.stderr.count("\n") == 1


def listening(port: int) -> list[str]:
    """The local addresses (hex, as ``/proc/net/tcp`` has them) that listen on ``port``."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return [row[1].split(":")[0] for row in rows if row[3] == "0A" and int(row[1].split(":")[1], 16) == port]


def test_a_held_agent_listens_where_its_stacks_host_says_and_everywhere_without_it(
        processes: list[subprocess.Popen[str]]) -> None:
    """Compose gives its tasks the loopback: only ``docker exec`` in the container reaches the agent, not the other
    containers of the network; a pod's listens on every address, for its supervisor (a NetworkPolicy keeps others out)."""
    for host, address in (("127.0.0.1", "0100007F"), ("", "00000000")):
        port = free_port()
        process = agent(SAVES_ON_SIGTERM, env={STACKS_PORT: str(port), EVENT_TOKEN: TOKEN, STACKS_HOST: host})
        processes.append(process)
        assert ready(process) == "ready"
        assert told(port, agent_control.Status(token=TOKEN)) == AgentState(run=1)
        assert listening(port) == [address]


def test_the_relay_imports_no_pydantic() -> None:
    """It runs at every restart on a compose host under load, where importing pydantic cost 0.25 s of the restart."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, launcher.worker.agent_relay; print(sorted(m for m in "
                             "sys.modules if m.split('.')[0] in ('pydantic', 'launcher')))"], cwd=REPO,
                            capture_output=True, text=True, timeout=PATIENCE, check=True)
    assert loaded.stdout.strip() == str(["launcher", "launcher.protocol", "launcher.protocol.endpoint_wire",
                                         "launcher.protocol.env", "launcher.protocol.stacks_signal", "launcher.worker",
                                         "launcher.worker.agent_relay"])
