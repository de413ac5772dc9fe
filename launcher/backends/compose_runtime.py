"""Containers as a supervisor ``Runtime``, and the detached supervisor process of the compose backend.

Contract: ``ContainerRuntime`` starts, polls, stops and reads the task
containers that ``docker compose up --no-start`` created (container name =
task name). A container that is gone (``docker rm -f``) is created again
through compose when started. ``poll`` reports a ``docker kill``/``docker
stop`` as the exit it caused (137/143), so the supervisor applies the spec's
restart policy to it, where Docker itself would not restart anything.

``python -m launcher.backends.compose_runtime STATE_DIR`` supervises the
cluster whose ``plan.json`` and compose files are in STATE_DIR until the job
is terminal, writing ``status.json`` there after every change; SIGTERM
cancels (every task is stopped before it exits).

Why a detached process and not the ``up`` process: ``up --detach`` must
return while supervision goes on (a gang restart after a lost worker
still has to happen), and a closed terminal must not orphan a training
group that waits forever; ``status``/``down`` from any shell find the
supervisor through STATE_DIR.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from launcher import procfs
from launcher.backends.api import JobStatus, LaunchError, State
from launcher.plan import Plan, Task
from launcher.state_files import read_json, write_json

SUPERVISOR_MODULE = "launcher.backends.compose_runtime"
PLAN_FILE = "plan.json"
STATUS_FILE = "status.json"
PID_FILE = "supervisor.pid"
LOG_FILE = "supervisor.log"
OVERRIDE_FILE = "supervised.yaml"
COMPOSE_COMMAND_FILE = "compose-command.json"
#: Seconds a stopped container gets between SIGTERM and SIGKILL.
STOP_TIMEOUT = 5
#: Exit code reported for a container that vanished (as if SIGKILLed).
GONE_EXIT = 137


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Text lines out of a stream of byte chunks (Docker log streams split lines anywhere)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.decode(errors="replace")
    if buffer:
        yield buffer.decode(errors="replace")


class ContainerRuntime:
    """One task = one container named after the task; output is followed by one thread per running container."""

    def __init__(self, client: Any, compose: list[str], workdir: Path):
        self.client = client
        self.compose = compose
        self.workdir = workdir
        self._lines: dict[str, queue.SimpleQueue[str]] = {}
        self._followers: dict[str, threading.Thread] = {}

    def start(self, task: Task) -> None:
        import docker.errors

        container = self._container(task) or self._recreate(task)
        since = time.time()
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise LaunchError(f"cannot start {task.name}: {exc.explanation or exc}") from exc
        follower = threading.Thread(target=self._follow, args=(container, since), daemon=True)
        self._followers[task.name] = follower
        follower.start()

    def poll(self, task: Task) -> int | None:
        container = self._container(task)
        if container is None:
            self._queue(task.name).put(f"container {task.name} is gone (removed outside tfcluster)")
            return GONE_EXIT
        state = container.attrs["State"]
        if state["Status"] not in ("exited", "dead"):
            return None
        self._join(task.name)
        return int(state["ExitCode"])

    def stop(self, tasks: Sequence[Task]) -> None:
        def stop_one(task: Task) -> None:
            container = self._container(task)
            if container is not None and container.status in ("running", "restarting", "paused"):
                container.stop(timeout=STOP_TIMEOUT)
            self._join(task.name)

        with ThreadPoolExecutor(max_workers=max(len(tasks), 1)) as pool:
            list(pool.map(stop_one, tasks))

    def output(self, task: Task) -> list[str]:
        lines, pending = [], self._queue(task.name)
        while not pending.empty():
            lines.append(pending.get_nowait())
        return lines

    def _queue(self, name: str) -> queue.SimpleQueue[str]:
        return self._lines.setdefault(name, queue.SimpleQueue())

    def _follow(self, container: Any, since: float) -> None:
        """Copy the container's output lines (from ``since``) to its queue until the container stops."""
        pending = self._queue(container.name)
        for line in iter_lines(container.logs(stream=True, follow=True, since=since)):
            pending.put(line)

    def _join(self, name: str) -> None:
        follower = self._followers.pop(name, None)
        if follower is not None:
            follower.join(timeout=5)

    def _container(self, task: Task) -> Any | None:
        import docker.errors

        try:
            return self.client.containers.get(task.name)
        except docker.errors.NotFound:
            return None

    def _recreate(self, task: Task) -> Any:
        """Create a removed task container again from the compose files."""
        run_compose(self.compose, self.workdir, "up", "--no-start", "--no-deps", task.name)
        container = self._container(task)
        if container is None:
            raise LaunchError(f"compose did not create {task.name}")
        return container


def compose_files() -> list[str]:
    from launcher.backends.compose import COMPOSE_FILE

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
    """The override under supervision: Docker restarts nothing, the supervisor does (see compose module doc)."""
    import yaml

    return yaml.safe_dump({"services": {t.name: {"restart": "no"} for t in plan.tasks}}, sort_keys=False)


# -- status.json --------------------------------------------------------------------------------


def write_status(workdir: Path, job: JobStatus) -> None:
    write_json(workdir / STATUS_FILE, job.to_dict())


def read_status(workdir: Path) -> JobStatus | None:
    data = read_json(workdir / STATUS_FILE)
    return None if data is None else JobStatus.from_dict(data)


def supervisor_pid(workdir: Path) -> int | None:
    """Pid of the cluster's running supervisor process (never a pid reused by another program), or None."""
    try:
        pid = int((workdir / PID_FILE).read_text())
    except (OSError, ValueError):
        return None
    return pid if procfs.runs(pid, SUPERVISOR_MODULE) else None


# -- the detached supervisor --------------------------------------------------------------------


def supervise(workdir: Path) -> int:
    """Supervise the cluster planned in ``workdir`` until it is terminal; 0 if it succeeded."""
    import docker

    from launcher.supervisor import Supervisor

    plan = Plan.model_validate_json((workdir / PLAN_FILE).read_text())
    compose = json.loads((workdir / COMPOSE_COMMAND_FILE).read_text())
    runtime = ContainerRuntime(docker.from_env(), compose, workdir)
    supervisor = Supervisor(plan, runtime, on_status=lambda job: write_status(workdir, job))
    signal.signal(signal.SIGTERM, lambda *_: supervisor.cancel())
    signal.signal(signal.SIGINT, lambda *_: supervisor.cancel())
    job = supervisor.run()
    print(f"{plan.name}: {job.state.value}: {job.message}", flush=True)
    return 0 if job.state is State.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))
