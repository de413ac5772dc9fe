"""``ContainerRuntime``'s restarts in place, against a container whose agent answers through ``docker exec`` as
``launcher.worker.agent_relay`` does (the real thing: ``tests/integration/test_compose_docker.py``, a killed
worker's program; the relay itself: ``tests/unit/worker/test_agent.py``).

Differences from Docker: the container's log is a list the test appends to, the exec runs no process (it answers
from the agent's scripted state), and ``kill``/``start`` only change ``status``."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors

from fakes.docker_engine import OneContainer
from helpers.polling import wait_for_condition
from launcher import api
from launcher.backends.compose.runtime import ContainerRuntime
from launcher.plan.planner import Task
from launcher.plan.targets import AGENT_RELAY_MODULE
from launcher.protocol import agent_control
from launcher.protocol.agent_control import AgentState

TOKEN = "0123456789abcdef0123456789abcdef"


class HeldContainer:
    """A running task container whose held agent answers the relay (``answers``: False, it does not)."""

    def __init__(self, name: str, answers: bool = True):
        self.name, self.status, self.answers = name, "running", answers
        self.attrs = {"State": {"ExitCode": 0, "StartedAt": "2026-01-01T00:00:00.000000000Z", "OOMKilled": False}}
        self.labels: dict[str, str] = {}
        self.state = AgentState(run=1)
        self.asked: list[dict[str, Any]] = []
        self.starts = 0
        self._log: queue.Queue[bytes] = queue.Queue()
        self.closed = False

    def end_run(self, code: int) -> None:
        """The agent's run ends: its line in the log, as the agent writes it."""
        self.state = AgentState(run=self.state.run, exit_code=code)
        self._log.put(f"run {self.state.run} ended\n{agent_control.exit_line(TOKEN, self.state)}\n".encode())

    def logs(self, stream: bool, follow: bool, since: float, **_: Any) -> Iterator[bytes]:
        while not self.closed:
            try:
                yield self._log.get(timeout=0.05)
            except queue.Empty:
                continue

    def exec_run(self, command: list[str], environment: Any = None, demux: bool = False) -> tuple[int, tuple[bytes, bytes]]:
        assert command[:3] == ["python", "-m", AGENT_RELAY_MODULE] and TOKEN not in " ".join(command)
        request = json.loads(command[3])
        self.asked.append(request)
        if not self.answers:
            return 1, (b"", b"its stack endpoint (127.0.0.1:9478) did not answer: Connection refused\n")
        if request["kind"] == "start":
            if self.state.running:
                return 0, (AgentState(run=self.state.run).model_dump_json().encode(), b"")
            self.state = AgentState(run=self.state.run + 1)
            return 0, (self.state.model_copy(update={"started": True}).model_dump_json().encode(), b"")
        if request["kind"] == "stop" and self.state.running:
            self.end_run(143)
        if request["kind"] == "quit":
            self.status = "exited"
        return 0, (self.state.model_dump_json().encode(), b"")

    def kill(self, signal: str | None = None) -> None:
        if self.status != "running":
            raise docker.errors.APIError("not running", response=type("R", (), {"status_code": 409})())
        self.status = "exited"

    def wait(self) -> None: ...

    def reload(self) -> None: ...

    def start(self) -> None:
        if self.status == "running":
            return  # Docker's start of a running container changes nothing
        self.starts += 1
        self.status, self.state = "running", AgentState(run=1)

    def close(self) -> None:
        self.closed = True


def runtime_of(tmp_path: Path, answers: bool = True) -> tuple[ContainerRuntime, Task, HeldContainer]:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {}}}), "compose")
    task = plan.tasks[0]
    container = HeldContainer(task.name, answers)
    container.status = "created"
    runtime = ContainerRuntime(client=OneContainer(container), compose=[], workdir=tmp_path, token=TOKEN)
    runtime.start(task)
    return runtime, task, container


def until(condition: Any) -> None:
    wait_for_condition(condition, timeout=30)


def test_a_run_ended_in_place_is_seen_and_the_next_one_started_by_the_agent_in_the_same_container(tmp_path: Path) -> None:
    runtime, task, container = runtime_of(tmp_path)
    try:
        assert (container.starts, runtime.poll(task)) == (1, None)
        container.end_run(137)
        until(lambda: runtime.poll(task) == 137)  # the container runs on: its agent holds it
        assert runtime.output(task) == ["run 1 ended"]  # the agent's own line is no output
        runtime.start(task)
        assert container.asked[-1] == {"kind": "start"} and container.starts == 1 and container.state.run == 2
        assert runtime.poll(task) is None
        runtime.stop([task], 0.0)  # asked of the agent, which stops the run; the container stays
        assert container.asked[-1] == {"kind": "stop", "grace_seconds": 0.0} and container.status == "running"
        assert runtime.poll(task) == 143
    finally:
        container.close()  # its log ends: its followers with it
        runtime.close()
    assert container.asked[-1] == {"kind": "quit"}  # the job ended: the held agent ends, and its container


def test_a_held_agent_that_does_not_answer_has_its_container_ended_and_started_afresh(tmp_path: Path) -> None:
    runtime, task, container = runtime_of(tmp_path, answers=False)
    try:
        container.end_run(1)
        until(lambda: runtime.poll(task) == 1)
        runtime.start(task)  # not in place: never a second run beside the held one
        assert container.asked[-1] == {"kind": "start"} and container.starts == 2 and container.status == "running"
    finally:
        container.close()  # its log ends: its followers with it
        runtime.close()
