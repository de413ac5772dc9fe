"""A Kubernetes task's main process (after tini, PID 1): it runs the task's program as its child, passes on
every signal it gets, serves the child's stacks on the agent's endpoint, and, there, runs the program again in
the same pod when the run's supervisor asks.

Contract: ``python -m launcher.worker.agent [--standby JSON [--zygote JSON]] -- PROGRAM [ARG...]`` starts
PROGRAM (same environment, working directory and stdio) and sends its run under way every ``FORWARDED`` signal
the agent gets (one that came before the first run existed, once it does): SIGTERM above all, by which a
preempted task saves. A run's exit code is the child's, 128+N for a child ended by signal N (as tini and a shell
report it: 143 for SIGTERM, 137 for SIGKILL); a PROGRAM that cannot be started is one line on stderr and 127
(not found) or 126. Without ``STACKS_PORT`` and the run's event token in its environment, the agent ends with
its one run's code. With them it serves ``launcher.protocol.stack_endpoint`` there
(``launcher.protocol.agent_control``: stacks, status, stop, start, quit) and is *held*: it outlives a run that
ended (``agent_control.exit_line`` on stdout says so) until the supervisor starts the next run in it, tells it
to quit, or ``HOLD_SECONDS`` passed with no new run; a signal in ``ENDING`` (the kubelet's SIGTERM: the pod is
deleted) ends it once no run is under way. It ends with its last run's code. A signal wakes the main thread,
which runs the handlers, through the interpreter's wakeup fd (``wake_on_signals``), wherever its C handler ran.

With ``--standby`` (a JSON argv: ``launcher.worker.standby``'s, called by a line on its stdin), a held agent
keeps a standby for the next run, which becomes it (TensorFlow is not imported again). With ``--zygote`` too
(the plan gives it with a standby of the entrypoint: ``launcher.plan.targets.zygote_command``) no standby
imports: the held agent starts that zygote (``launcher.worker.zygote``), which imports TensorFlow once, at the
normal priority, and every run, the first one too, is a standby called at once whose task the zygote forks
into the standby's process group (``launcher.protocol.standby``); the next standby is started once a run ended
(about 50 ms). No second import competes with the runs (a pod's threads share its CPU weight, whatever their
own priority) and a restart forks at once. Such a run's signals go to its process group (``GROUP_SIGNALS``;
``STACKS_SIGNAL`` to the standby, which passes it on), its stop kills the group, and a run that ended takes its
group with it. Where the zygote cannot serve, and for another standby program, the standby imports by itself
(at idle priority, started with each run).

The stacks answer is ``py-spy dump`` of the run's processes that run Python (``child_stacks``): the child and
its descendants, or the forked task and its descendants. py-spy reads them from outside, so it answers while
the program's main thread holds the GIL or waits in native code, and needs no capability: the kernel (Yama
``ptrace_scope`` 1, the default) lets a process read its own descendants (a zygote's child is one). It imports
only the standard library, pydantic and ``launcher.protocol`` (and this package's ``stack_server``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from launcher.protocol import agent_control
from launcher.protocol.endpoint_wire import STACKS_HOST, STACKS_PORT
from launcher.protocol.env import EVENT_TOKEN
from launcher.protocol.pyspy_command import PYSPY_ENV, PYSPY_SECONDS, dump_command, pyspy_binary
from launcher.protocol.stack_endpoint import Control
from launcher.protocol.standby import GROUP_SIGNALS, ZYGOTE_FD, start_zygote, zygote_channel
from launcher.worker.stack_server import serve_stacks

#: The signals the agent passes on to its child (SIGKILL and SIGSTOP cannot be caught; the kubelet's SIGKILL
#: after the grace ends the whole container).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
#: The exit codes of a program that cannot be started, as a shell has them.
NOT_RUNNABLE, NOT_FOUND = 126, 127
#: The signals that end a held agent once no run is under way (the pod is being deleted, or Ctrl-C).
ENDING = (signal.SIGTERM, signal.SIGINT)
#: How long a held agent waits, once a run ended, for the supervisor to start the next one or tell it to quit.
HOLD_SECONDS = 600.0
#: The line that calls the standby: where it writes (the agent's own stdout, the container's log).
CALL_LINE = b"/dev/stdout\n"
#: Where the kernel counts the OOM kills in the container's cgroup: cgroup v2, v1.
MEMORY_EVENTS = (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))
USAGE = (f"usage: python -m launcher.worker.agent [{agent_control.STANDBY_OPTION} JSON [{agent_control.ZYGOTE_OPTION} JSON]] "
         "-- PROGRAM [ARG...]")
_ARGV: TypeAdapter[list[str]] = TypeAdapter(list[str])


def descendants(root: int, proc: Path = Path("/proc"), group: bool = False) -> list[int]:
    """``root`` and every process below it, parents first (read from ``/proc/<pid>/stat``); with ``group``, the
    other processes of ``root``'s process group (a zygote's forked task) and every one below them, not ``root``
    (unless ``root`` is alone in it: a standby that became the task itself, its zygote gone)."""
    children: dict[int, list[int]] = {}
    members: list[int] = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except OSError:  # it ended meanwhile
            continue
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        if group and int(fields[2]) == root and pid != root:
            members.append(pid)
    found = sorted(members) if group and members else [root]
    for pid in found:
        found += [child for child in sorted(children.get(pid, [])) if child not in found]
    return found


def child_stacks(child: int, group: bool = False) -> str:
    """``py-spy dump`` of the run's processes (``descendants``) that run Python; "" if none could be read."""
    binary = pyspy_binary()
    if binary is None:
        return ""
    dumps = []
    for pid in descendants(child, group=group):
        try:
            done = subprocess.run(dump_command(pid, binary), capture_output=True, timeout=PYSPY_SECONDS,
                                  env={**os.environ, **PYSPY_ENV}, stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError):
            continue
        if done.returncode == 0 and done.stdout.strip():
            dumps.append(done.stdout.decode(errors="replace").rstrip())
    return "\n\n".join(dumps) + "\n" if dumps else ""


def oom_kills(sources: Sequence[Path] = MEMORY_EVENTS) -> int:
    """How many processes the kernel's OOM killer ended in this container's cgroup so far (its ``oom_kill`` count;
    0 where unknown)."""
    for source in sources:
        try:
            lines = source.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


class Agent:
    """The program's runs, one at a time, and the standby the next one becomes (module contract)."""

    def __init__(self, program: Sequence[str], standby: Sequence[str], token: str, held: bool,
                 zygote: Sequence[str] = ()):
        self.program, self.standby_command, self.token, self.held = list(program), list(standby), token, held
        self.zygote_command = list(zygote) if standby else []
        self.cond = threading.Condition()
        self.child: subprocess.Popen[bytes] | None = None
        self.standby: subprocess.Popen[bytes] | None = None
        #: The pod's zygote and its control channel, while one serves the standbys (``zygote_command``).
        self.zygote_process: subprocess.Popen[bytes] | None = None
        self.zygote: socket.socket | None = None
        #: The run under way is a zygote's task in the process group of its standby (the child).
        self.grouped = False
        #: Whether the standby waiting is one the zygote forks for.
        self._standby_grouped = False
        self.run = 0
        self.code: int | None = None
        self.oom_killed = False
        self._oom_before = 0
        #: The agent was told to end (a signal that ends it, or ``quit``): it does once no run is under way.
        self.ending = False
        self.early: list[int] = []

    # -- the requests (``launcher.protocol.agent_control``) ---------------------------------------------------

    def control(self, request: Control) -> agent_control.AgentState:
        if isinstance(request, agent_control.Stop):
            return self.stop(request.grace_seconds)
        if isinstance(request, agent_control.Start):
            return self.start()
        with self.cond:
            if isinstance(request, agent_control.Quit) and not self._running():
                self.ending = True
                self.cond.notify_all()
            return self._state()

    def start(self) -> agent_control.AgentState:
        with self.cond:
            if self._running() or self.ending:
                return self._state()
            self._begin()
            return self._state(started=True)

    def stop(self, grace_seconds: float) -> agent_control.AgentState:
        with self.cond:
            child, run = self.child, self.run
            if child is not None and self._running():
                self._signal(child, signal.SIGTERM)
                if not self.cond.wait_for(lambda: self.run != run or self.code is not None, grace_seconds):
                    self._signal(child, signal.SIGKILL)
                    self.cond.wait_for(lambda: self.run != run or self.code is not None)
            return self._state()

    def stacks(self) -> str:
        child = self.child
        return child_stacks(child.pid, self.grouped) if child is not None and self._running() else ""

    def wake_on_signals(self, woken: int) -> None:
        """Wakes the main thread once per signal the agent got (``woken``: the read end of the interpreter's
        wakeup fd): Python runs a handler (``forward``) in the main thread only, at its next bytecode, so a signal
        whose C handler ran just before the main thread blocked in ``cond.wait``, or in another thread, would
        wait there until the run ended (never, for a program that waits for that signal)."""
        while os.read(woken, 64):
            with self.cond:
                self.cond.notify_all()

    # -- the runs --------------------------------------------------------------------------------------------

    def forward(self, signum: int, _frame: object) -> None:
        """A signal the agent got: passed on to the run under way (kept for the first one, before it exists);
        one that ends the agent (``ENDING``) makes it end once no run is under way."""
        child = self.child
        if child is None:
            self.early.append(signum)
        elif self._running():
            self._signal(child, signum)
        if signum in ENDING:
            with self.cond:
                self.ending = True
                self.cond.notify_all()

    def serve(self) -> int:
        """Runs the program, then serves until the agent ends; its exit code (the last run's)."""
        with self.cond:
            if self.held and self.zygote_command:
                try:  # its output the container's; it imports now
                    self.zygote_process, self.zygote = start_zygote(self.zygote_command)
                except OSError as exc:  # each standby imports by itself
                    print(f"tfcluster agent: no zygote: {exc.strerror or exc}", file=sys.stderr, flush=True)
                else:
                    self._prepare()
            try:  # the first run too is the zygote's fork, where one serves: the pod imports once
                self.child = (self._call_standby() if self._standby_grouped else None) or self._spawn()
            except OSError as exc:
                print(f"tfcluster agent: cannot run {self.program[0]!r}: {exc.strerror or exc}", file=sys.stderr,
                      flush=True)
                return NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_RUNNABLE
            self._began(self.child)
            for pending in self.early:
                self._signal(self.child, pending)
            while not (self.ending and not self._running()):
                if self._running() or not self.held:
                    self.cond.wait()
                elif not self.cond.wait(HOLD_SECONDS) and not self._running():
                    self.ending = True  # no supervisor came back for it: the pod ends as its last run did
        if self.standby is not None and self.standby.stdin is not None:
            self.standby.stdin.close()  # its end of file: it ends
        if self.zygote is not None:
            self.zygote.close()  # it ends once its standbys and children did
        return NOT_FOUND if self.code is None else self.code

    def _running(self) -> bool:
        return self.child is not None and self.code is None

    def _state(self, started: bool = False) -> agent_control.AgentState:
        return agent_control.AgentState(run=self.run, exit_code=self.code, oom_killed=self.oom_killed,
                                        started=started)

    def _begin(self) -> None:
        """A fresh run: the standby called, or the program started anew (one that cannot be is a run ended
        with 127 or 126)."""
        try:
            self.child = self._call_standby() or self._spawn()
        except OSError as exc:
            print(f"tfcluster agent: cannot run {self.program[0]!r}: {exc.strerror or exc}", file=sys.stderr,
                  flush=True)
            self.run += 1
            self._ended(NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_RUNNABLE)
            return
        self._began(self.child)

    def _call_standby(self) -> subprocess.Popen[bytes] | None:
        """The standby waiting, called (``grouped`` says whether the zygote forks its task); None if none is."""
        standby, self.standby = self.standby, None
        if standby is not None and standby.poll() is None and standby.stdin is not None:
            try:
                standby.stdin.write(CALL_LINE)
                standby.stdin.close()
                self.grouped = self._standby_grouped
                return standby
            except OSError:  # it ended meanwhile
                standby.kill()
        return None

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.grouped = False
        return subprocess.Popen(self.program)

    def _prepare(self) -> None:
        """A standby for the next run (stdout and stderr the container's; stdin is how it is called, its end of file
        ends it): the zygote's, in a process group of its own, where one serves; else one that imports by itself."""
        self._standby_grouped = False
        channel = None if self.zygote is None else zygote_channel(self.zygote)
        if self.zygote is not None and channel is None:
            print("tfcluster agent: the zygote ended: the standby imports by itself", file=sys.stderr, flush=True)
            self.zygote.close()
            self.zygote = None
        try:
            if channel is None:
                self.standby = subprocess.Popen(self.standby_command, stdin=subprocess.PIPE)
            else:
                with channel:
                    self.standby = subprocess.Popen(
                        self.standby_command, stdin=subprocess.PIPE, process_group=0, pass_fds=[channel.fileno()],
                        env={**os.environ, ZYGOTE_FD: str(channel.fileno())})
            self._standby_grouped = channel is not None
        except OSError as exc:
            print(f"tfcluster agent: no standby: {exc.strerror or exc}", file=sys.stderr, flush=True)

    def _signal(self, child: subprocess.Popen[bytes], signum: int) -> None:
        """``signum`` to the run under way: to its process group for a zygote's task (``GROUP_SIGNALS``, SIGKILL),
        else to the child (a no-op once it was reaped)."""
        if self.grouped and (signum in GROUP_SIGNALS or signum == signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signum)
        else:
            child.send_signal(signum)

    def _began(self, child: subprocess.Popen[bytes]) -> None:
        self.run += 1
        self.code = None
        self.oom_killed = False
        self._oom_before = oom_kills()
        threading.Thread(target=self._watch, args=(child, self.run), name=f"tfcluster-run-{self.run}",
                         daemon=True).start()
        if self.held and self.standby_command and self.standby is None and self.zygote is None:
            self._prepare()  # it imports meanwhile (a zygote's is made once the run ended: ``_ended``)

    def _watch(self, child: subprocess.Popen[bytes], run: int) -> None:
        code = child.wait()
        with self.cond:
            if run == self.run:
                if self.grouped:  # what its task left in its group (a killed standby's task too)
                    self._signal(child, signal.SIGKILL)
                self._ended(128 - code if code < 0 else code)

    def _ended(self, code: int) -> None:
        """The current run ended with ``code`` (the lock held): said in the log, and to whoever waits."""
        self.code = code
        self.oom_killed = oom_kills() > self._oom_before
        if self.held and self.zygote is not None and self.standby is None:
            self._prepare()  # not while the run started: no process but the runs' then (it costs ~50 ms)
        if self.held:
            print(agent_control.exit_line(self.token, self._state()), flush=True)
        else:
            self.ending = True
        self.cond.notify_all()


def run(program: Sequence[str], standby: Sequence[str] = (), environ: Mapping[str, str] = os.environ,
        zygote: Sequence[str] = ()) -> int:
    """``program`` run as the agent's child (see the module contract); the agent's exit code."""
    port = environ.get(STACKS_PORT, "")
    token = environ.get(EVENT_TOKEN, "")
    agent = Agent(program, standby, token, held=port.isdigit() and bool(token), zygote=zygote)
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    threading.Thread(target=agent.wake_on_signals, args=(woken,), name="tfcluster-signals", daemon=True).start()
    for signum in FORWARDED:
        signal.signal(signum, agent.forward)
    server = serve_stacks(token, int(port), agent.stacks, environ.get(STACKS_HOST, ""), agent.control) if agent.held else None
    code = agent.serve()
    if server is not None:  # the answers under way (a quit's) written first
        server.shutdown()
        server.server_close()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    commands: dict[str, list[str]] = {}
    while args[:1] and args[0] in (agent_control.STANDBY_OPTION, agent_control.ZYGOTE_OPTION) and len(args) > 1:
        try:
            commands[args[0]] = _ARGV.validate_json(args[1])
        except ValidationError:
            print(f"{args[0]} wants a JSON list of strings", file=sys.stderr)
            return 2
        args = args[2:]
    program = args[1:] if args[:1] == ["--"] else args
    if not program:
        print(USAGE, file=sys.stderr)
        return 2
    return run(program, commands.get(agent_control.STANDBY_OPTION, []),
               zygote=commands.get(agent_control.ZYGOTE_OPTION, []))

if __name__ == "__main__":
    sys.exit(main())
