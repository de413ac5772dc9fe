"""Containers as a supervisor ``Runtime``, and ``docker compose`` as the compose backend calls it.

Contract: ``ContainerRuntime`` starts, polls, stops and reads the task containers (container name =
task name) that ``docker compose up --no-start`` created, re-creating a removed one on start. Restarts happen *in
place* where the task's container still runs its agent (``launcher.worker.agent``, held under supervision: it
outlives a run; ``override_document``): ``stop`` asks the agent to stop the run (SIGTERM, SIGKILL after the grace)
and ``start`` to start the next one in the same container (forked by its zygote: TensorFlow imported, the same
name and address), each through ``docker exec`` (``docker_exec.ask_agent``: no port is published); ``poll`` reads
the end of such a run from the agent's line in the container's log (``agent_control.exit_line``; asked of the agent
when the log's stream broke). A container that ended, is gone, or whose agent does not answer is stopped and
started, or replaced by its standby, as before. ``poll`` reports ``docker kill``/``docker stop`` as 137/143;
``oom_killed`` is the engine's ``OOMKilled``, or the agent's word for a run that ended in place.
Docker API errors propagate (the supervisor retries). ``adopt`` follows a container's current run and
returns once what it wrote so far is in ``output`` (a fresh ``stacks_on_signal`` included: ``debug`` reads it at
once), or a full batch of it (``launcher.backends.lines.LineQueue``),
``read_exits`` reads without following. Standbys: ``prepare`` starts one per task, ``start`` promotes
it, ``close`` tells each held agent to quit (its container then ends as its last run did) and removes the standbys
left. ``run_compose`` runs compose with ``OVERRIDE_FILE``.
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from launcher.backends.agent_log import RunLog
from launcher.backends.compose import standbys
from launcher.backends.compose.docker_exec import ask_agent, read_stacks_in
from launcher.backends.compose.render import COMPOSE_FILE
from launcher.backends.lines import iter_lines
from launcher.backends.pyspy import say_none
from launcher.errors import LaunchError
from launcher.plan.held_program import held_program
from launcher.plan.planner import Plan, Task
from launcher.protocol import agent_control, endpoint_wire, stack_endpoint
from launcher.protocol.exitcodes import LOST_EXIT
from launcher.protocol.stacks_signal import STACKS_SIGNAL

OVERRIDE_FILE = "supervised.yaml"
#: Docker's container statuses of a container whose process ended (its ``State.ExitCode`` is final).
ENDED_STATUSES = frozenset({"exited", "dead"})


def exit_code(container: Any) -> int | None:
    """The exit code of ``container``'s process once it ended, else None."""
    return int(container.attrs["State"]["ExitCode"]) if container.status in ENDED_STATUSES else None


#: How long ``adopt`` waits for its follower to deliver what the container had written (a broken stream ends it).
CATCH_UP_SECONDS = 30.0
#: How long a read of an ended container's output waits for its follower to reach the end of the log (or fill).
JOIN_SECONDS = 5.0


class _Follower:
    """One container run's output, followed by a thread of its own into a ``RunLog`` (its agent's runs, if any)."""

    def __init__(self, container: Any, since: float, token: str):
        self.log = RunLog(token)
        self.ended = False  # the container's run ended (``poll`` or ``stop`` saw it): reads wait for the rest
        self._thread = threading.Thread(target=self._follow, args=(container, since), daemon=True)
        self._thread.start()

    def _follow(self, container: Any, since: float) -> None:
        """Copy the container's output lines (from ``since``) to the queue until the container stops.

        Docker's stream of its stdout and stderr, without timestamps or a tty: the program's lines as it wrote
        them, which the event reader takes as they are (``launcher.protocol.events``).

        A stream the engine breaks just ends: the next ``poll`` meets the same fault and the supervisor handles it.
        """
        try:
            for line in iter_lines(container.logs(stream=True, follow=True, since=since)):
                if not self.log.put(line):
                    return
        except Exception:  # noqa: BLE001 - see the docstring
            return
        finally:
            self.log.lines.end()

    def stop(self) -> None:
        """Nothing more is read: the thread ends at its next line (or with the stream)."""
        self.log.lines.abandon()

    def join(self) -> None:
        self._thread.join(timeout=JOIN_SECONDS)

    @property
    def following(self) -> bool:
        return self._thread.is_alive()


class ContainerRuntime:
    """One task = one container named after the task; output is followed by one thread per running container."""

    def __init__(self, client: Any, compose: list[str], workdir: Path, token: str = ""):
        """``token``: the run's event token, by which the agents' lines are known (none: no run ends in place)."""
        self.client = client
        self.compose = compose
        self.workdir = workdir
        self.token = token
        self._followers: dict[str, _Follower] = {}
        self._standbys: set[str] = set()
        self._retiring: list[threading.Thread] = []
        #: Each task's current run in its container, as its agent numbers them (1: the container's first).
        self._run: dict[str, int] = {}
        #: How each task's last run ended where its agent said so (the container still runs, held for the next).
        self._ended: dict[str, agent_control.AgentState] = {}

    def start(self, task: Task) -> None:
        import docker.errors

        if self._start_in_place(task):
            return
        self._end_held(task)
        since = time.time()
        self._run[task.name] = 1
        self._ended.pop(task.name, None)
        container = standbys.call(self.client, task, self._retire) if task.name in self._standbys else None
        self._standbys.discard(task.name)
        if container is None:
            container = self._container(task) or self._recreate(task)
            try:
                container.start()
            except docker.errors.APIError as exc:
                raise LaunchError(f"cannot start {task.name}: {exc.explanation or exc}") from exc
        self._follow(task, container, since)

    def start_together(self, tasks: Sequence[Task]) -> None:
        """``StartsTogether``: a group's ``start``s at once (each in place is a ``docker exec``)."""
        with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
            list(pool.map(self.start, tasks))

    def prepare(self, tasks: Sequence[Task]) -> None:
        def prepare_one(task: Task) -> None:
            standbys.create(self.client, task)
            self._standbys.add(task.name)  # each as it is made: ``close`` removes it even if another one failed

        with ThreadPoolExecutor(max_workers=max(len(tasks), 1)) as pool:
            list(pool.map(prepare_one, tasks))

    def _retire(self, container: Any) -> None:
        retiring = threading.Thread(target=standbys.retire, args=(container, self.workdir), daemon=True)
        self._retiring.append(retiring)
        retiring.start()

    def adopt(self, task: Task) -> bool:
        """Follow the task's running container, and keep the standby the dead supervisor prepared for it.

        Returns once the follower delivered the lines the run had written (counted from one read without
        following; the follower stays the one source of lines, so none is lost or read twice), or as many as
        its queue holds (the rest at the next reads)."""
        if standbys.find(self.client, standbys.standby_name(task.name)) is not None:
            self._standbys.add(task.name)
        container = self._container(task)
        if container is None or container.status == "created":
            return False  # removed, or never started
        self._run[task.name] = 1
        self._ended.pop(task.name, None)
        if exit_code(container) is None and (state := self._ask_state(container)) is not None and state.run:
            self._run[task.name] = state.run  # a held agent's run may have ended, or be a later one
            if state.exit_code is not None:
                self._ended[task.name] = state
        since = started_at(container)
        written = sum(chunk.count(b"\n") for chunk in container.logs(stream=True, follow=False, since=since))
        self._follow(task, container, since).log.lines.wait_for(written, CATCH_UP_SECONDS)
        return True

    def oom_killed(self, task: Task) -> bool:
        """True if the kernel's OOM killer ended the task container's process (Docker's ``State.OOMKilled``), or
        struck in it while the run its agent ended ran."""
        if (ended := self._ended.get(task.name)) is not None:
            return ended.oom_killed
        container = self._container(task)
        return container is not None and bool(container.attrs["State"].get("OOMKilled"))

    def poll(self, task: Task) -> int | None:
        container = self._container(task)
        if container is None:
            self._say(task.name, f"container {task.name} is gone (removed outside tfcluster)")
            return LOST_EXIT
        code = exit_code(container)
        if code is not None:
            self._finished(task.name)
            ended = self._ended.get(task.name)
            return code if ended is None else ended.exit_code
        ended = self._ended_run(task, container)
        return None if ended is None else ended.exit_code

    def stop(self, tasks: Sequence[Task], grace_seconds: float) -> None:
        """SIGTERM (through tini), SIGKILL after ``grace_seconds``: ``docker stop`` counts whole seconds, so
        a shorter grace is kept here."""
        def stop_one(task: Task) -> None:
            container = self._container(task)
            if container is not None and container.status in ("running", "restarting", "paused"):
                if task.name in self._ended or self._stop_in_place(task, container, grace_seconds):
                    return  # its run ended in place: the container waits for the next
                if grace_seconds >= 1:
                    container.stop(timeout=math.ceil(grace_seconds))
                else:
                    _stop_within(container, grace_seconds)
            self._finished(task.name)

        with ThreadPoolExecutor(max_workers=max(len(tasks), 1)) as pool:
            list(pool.map(stop_one, tasks))

    def dump_stacks(self, task: Task) -> None:
        """``STACKS_SIGNAL`` to the container's init, which forwards it to the program (docker-init, tini)."""
        import docker.errors

        container = self._container(task)
        if container is None or container.status != "running":
            return
        try:
            container.kill(signal=STACKS_SIGNAL.name)
        except docker.errors.APIError:
            pass  # it ended meanwhile: no stacks, the report says so

    def read_stacks(self, task: Task) -> str | None:
        """Every thread's Python stack of the task's program: asked of its agent where the container has one held
        (its run's processes only: not the agent's, nor its zygote's), else read inside its container with the image's
        py-spy (``launcher.backends.pyspy.read_container_stacks``). None, with one line on stderr saying why, when
        there is none."""
        container = self._container(task)
        if container is None or container.status != "running":
            return None
        answer, _ = ask_agent(container, agent_control.Stacks(token=self.token)) if self.token else (None, "")
        dump, why = stack_endpoint.stacks_of(answer, f"{task.name}'s agent") if answer is not None \
            else read_stacks_in(container)
        if dump is None:
            say_none(task.name, why)
        return dump

    def close(self) -> None:
        quit_ = agent_control.Quit(token=self.token)
        for name in list(self._ended):
            container = standbys.find(self.client, name)
            if container is not None and container.status == "running":
                ask_agent(container, quit_)
        self._ended.clear()
        for follower in self._followers.values():
            follower.stop()
            follower.join()
        self._followers.clear()
        for name in self._standbys:
            standbys.remove(self.client, name)
        self._standbys.clear()
        for retiring in self._retiring:
            retiring.join()
        self._retiring.clear()

    def output(self, task: Task) -> list[str]:
        """The lines its follower read since the last call; of an ended run, waiting (``JOIN_SECONDS``) for the
        follower to reach the end of the log or fill its queue."""
        follower = self._followers.get(task.name)
        if follower is None:
            return []
        return follower.log.lines.take(JOIN_SECONDS if follower.ended else 0.0)

    def _follow(self, task: Task, container: Any, since: float) -> _Follower:
        """Follow the container's run from ``since``, in place of its previous run's follower."""
        previous = self._followers.pop(task.name, None)
        if previous is not None:
            previous.stop()
        follower = self._followers[task.name] = _Follower(container, since, self.token)
        return follower

    def _finished(self, name: str) -> None:
        """The task's container ended (or was stopped): reads of its output wait for the rest of its log."""
        follower = self._followers.get(name)
        if follower is not None:
            follower.ended = True

    def _ask_state(self, container: Any, request: stack_endpoint.Control | None = None) -> agent_control.AgentState | None:
        """The agent's answer to ``request`` (``Status`` by default), or None where no agent answers."""
        if not self.token:
            return None
        control = request or agent_control.Status(token=self.token)
        answer, _ = ask_agent(container, control)
        return None if answer is None else stack_endpoint.state_of_answer(answer, control, container.name)[0]

    def _start_in_place(self, task: Task) -> bool:
        """The task's next run started by the agent of its container, which still runs: True; False where it does
        not (its run did not end in place, the container ended or is gone, its agent does not answer)."""
        if task.name not in self._ended:
            return False
        container = self._container(task)
        if container is None or container.status != "running":
            return False
        state = self._ask_state(container, agent_control.Start(token=self.token))
        if state is None or not state.started:
            return False
        self._run[task.name] = state.run
        del self._ended[task.name]
        follower = self._followers.get(task.name)
        if follower is None or not follower.following:  # the same log goes on: the next run's lines follow
            self._follow(task, container, time.time())
        return True

    def _end_held(self, task: Task) -> None:
        """The task's container, still running at a start that was not made in place (its agent, held once its run
        ended, did not answer), ended first: the task then starts as from an ended container, never beside it."""
        container = self._container(task)
        if container is not None and container.status in ("running", "restarting", "paused"):
            _stop_within(container, 0.0)
            container.reload()

    def _stop_in_place(self, task: Task, container: Any, grace_seconds: float) -> bool:
        """The task's run stopped by its container's agent (the container stays): True; False where no agent did."""
        state = self._ask_state(container, agent_control.Stop(token=self.token, grace_seconds=grace_seconds))
        if state is None or state.exit_code is None or state.run != self._run.get(task.name, 1):
            return False
        self._ended[task.name] = state
        return True

    def _ended_run(self, task: Task, container: Any) -> agent_control.AgentState | None:
        """How the task's current run ended in its running container, if its agent said so (in the log; asked of
        it where the log's stream broke); None while it runs."""
        if (ended := self._ended.get(task.name)) is not None:
            return ended
        follower = self._followers.get(task.name)
        if follower is None or not self.token:
            return None
        run = self._run.get(task.name, 1)
        state = follower.log.ended.get(run)
        if state is None and not follower.following:
            asked = self._ask_state(container)
            state = asked if asked is not None and asked.run == run and asked.exit_code is not None else None
        if state is not None:
            self._ended[task.name] = state
        return state

    def _say(self, name: str, line: str) -> None:
        """A line in the task's output (the supervisor's record of why its run ended)."""
        follower = self._followers.get(name)
        if follower is not None:
            follower.log.lines.note(line)

    def _container(self, task: Task) -> Any | None:
        return standbys.find(self.client, task.name)

    def _recreate(self, task: Task) -> Any:
        """Create a removed task container again from the compose files."""
        run_compose(self.compose, self.workdir, "up", "--no-start", "--no-deps", task.name)
        container = self._container(task)
        if container is None:
            raise LaunchError(f"compose did not create {task.name}")
        return container


def _stop_within(container: Any, grace_seconds: float) -> None:
    """SIGTERM, then SIGKILL unless the container ended within ``grace_seconds`` (under a second); returns once
    it ended, as ``docker stop`` does."""
    import docker.errors

    ends = time.monotonic() + grace_seconds
    try:
        container.kill(signal="SIGTERM")
        while time.monotonic() < ends:
            container.reload()
            if container.status in ENDED_STATUSES:
                return
            time.sleep(0.05)
        container.kill()
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: it is not running (any more): ended already
            raise
    container.wait()


def started_at(container: Any) -> float:
    """When the container's current run started (unix seconds)."""
    return docker_time(container.attrs["State"]["StartedAt"])


def docker_time(stamp: str) -> float:
    """Docker's nanosecond RFC 3339 UTC time (``2026-01-01T00:00:00.123456789Z``) as unix seconds."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float(f"0.{fraction or 0}")


def read_exits(containers: Sequence[Any]) -> dict[str, int | None]:
    """``{task: exit code, None while it runs}`` of the task containers (no standby: ``standbys.is_task_container``)
    that were started."""
    return {c.name: exit_code(c) for c in containers if c.status != "created"}


def compose_files() -> list[str]:
    return ["-f", COMPOSE_FILE, "-f", OVERRIDE_FILE]


def run_compose(compose: list[str], workdir: Path, *args: str) -> str:
    """Run ``docker compose -f ... ARGS`` in ``workdir``; raise LaunchError with its stderr if it fails."""
    result = subprocess.run(
        [*compose, *compose_files(), *args], cwd=workdir, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LaunchError(f"`{' '.join(compose)} {' '.join(args)}` failed: {detail[-1] if detail else result.returncode}")
    return result.stdout


def override_document(plan: Plan) -> str:
    """The override under supervision: Docker restarts nothing, the supervisor does (see compose module doc); each
    task's agent, where it has one, serves on ``STACKS_PORT`` at its container's loopback (``docker exec`` reaches it,
    the other containers do not) and so is held for restarts in place."""
    held = {endpoint_wire.STACKS_PORT: str(endpoint_wire.PORT), endpoint_wire.STACKS_HOST: endpoint_wire.LOOPBACK}
    return yaml.safe_dump({"services": {t.name: {"restart": "no", **({"environment": held} if held_program(plan, t) else {})}
                                        for t in plan.tasks}}, sort_keys=False)
