"""Docker Compose backend: one container per task on a private network, supervised by tfcluster.

Contract:

- ``render(plan)`` is pure and deterministic: ``{"docker-compose.yaml": ...}``
  with one service per task (service = container name = hostname = task
  name, so TF_CONFIG addresses resolve), the task's command and full
  environment, one network per cluster that publishes no port on the host,
  the checkpoint volume mounted at the checkpoint dir, resource limits,
  the restart policy mapped from the spec, ``tfcluster.*`` labels, a
  non-root ``user`` and ``init: true``. The compose project is the cluster name.
- ``create()`` returns a ``ComposeBackend``: ``submit`` writes the file under
  ``registry.home()/compose/<name>/``, creates everything with
  ``docker compose up --no-start`` and hands the containers to a detached
  supervisor process (``launcher.backends.compose_runtime``); ``describe``,
  ``logs`` and ``cancel`` use the Docker SDK and the compose project label.

Who restarts: under ``tfcluster up`` the shared supervisor
(``launcher.supervisor``) is the only restarter. An override file sets
``restart: "no"`` on every service, because Docker's policy restarts one
container at a time (MultiWorkerMirrored needs the whole group restarted),
counts per container instead of per job, cannot tell exit codes apart
(``exit-code``), and ignores ``docker kill``/``docker stop`` (after which the
surviving MWMS workers would wait forever). The supervisor sees such a stop
as an exit 137/143 and applies the spec's policy. The rendered policy is
what a user gets when running the file with ``docker compose`` by hand.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import yaml

from launcher import naming
from launcher.literal import literal
from launcher.plan import Plan, Task
from launcher.problems import Problem, SpecError
from launcher.quantities import byte_count
from launcher.spec import Resources, RestartPolicy
from launcher.targets import CONTAINER_CHECKPOINT_DIR

COMPOSE_FILE = "docker-compose.yaml"
#: The image's non-root user (worker_image/Dockerfile), owner of /checkpoints.
TASK_USER = "1000:1000"
LABEL_PREFIX = "tfcluster."
PROJECT_LABEL = "com.docker.compose.project"
def docker_restart_policy(plan: Plan) -> str:
    """The spec's restart policy in Docker's terms, for runs of the file by hand.

    ``never`` (or a zero budget) is ``no``; ``on-failure``, ``exit-code`` and
    ``always`` become ``on-failure:<max_restarts>``: Docker cannot retry by
    exit code, and its ``always`` would restart a chief that finished.
    """
    restart = plan.spec.restart
    if restart.policy is RestartPolicy.NEVER or restart.max_restarts == 0:
        return "no"
    return f"on-failure:{restart.max_restarts}"


def labels(plan: Plan, task: Task) -> dict[str, str]:
    return {
        f"{LABEL_PREFIX}cluster": plan.name,
        f"{LABEL_PREFIX}task": task.name,
        f"{LABEL_PREFIX}role": task.type.value,
        f"{LABEL_PREFIX}index": str(task.index),
        f"{LABEL_PREFIX}run-id": plan.run_id,
    }


def _limits(resources: Resources) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if resources.cpu is not None:
        limits["cpus"] = resources.cpu
    if resources.memory is not None:
        limits["mem_limit"] = byte_count(resources.memory)
    if resources.gpu:
        device = {"driver": "nvidia", "count": resources.gpu, "capabilities": ["gpu"]}
        limits["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    return limits


def checkpoint_mount(plan: Plan) -> str | None:
    """Where the checkpoint volume is mounted: always ``/checkpoints``; None for object-store dirs.

    The image makes ``/checkpoints`` for the non-root user, and a fresh named
    volume takes its owner from the mount point; mounted anywhere else it
    would be root's and unwritable. A local ``checkpoint.dir`` must therefore
    lie below it (``SpecError`` otherwise).
    """
    directory = plan.run_config.checkpoint_dir
    if "://" in directory:
        return None
    root = PurePosixPath(CONTAINER_CHECKPOINT_DIR)
    if root != PurePosixPath(directory) and root not in PurePosixPath(directory).parents:
        raise SpecError([Problem(
            "checkpoint.dir",
            f"on compose must be {CONTAINER_CHECKPOINT_DIR} or a path below it (the checkpoint volume, "
            f"writable by the non-root tasks), or a gs:// or s3:// URL; got {directory!r}",
        )])
    return CONTAINER_CHECKPOINT_DIR


def service(plan: Plan, task: Task) -> dict[str, Any]:
    """One task's service. Strings from the spec pass through ``literal``: Compose would expand ``$VAR``."""
    network = naming.network_name(plan.name)
    mount = checkpoint_mount(plan)
    definition: dict[str, Any] = {
        "image": literal(task.image),
        "container_name": task.name,
        "hostname": task.name,
        "command": [literal(arg) for arg in task.command],
        "environment": {key: literal(value) for key, value in plan.task_env(task).items()},
        "user": TASK_USER,
        "init": True,
        "restart": docker_restart_policy(plan),
        "networks": [network],
        "labels": labels(plan, task),
    }
    if mount is not None:
        source = naming.checkpoint_volume_name(plan.name)
        definition["volumes"] = [{"type": "volume", "source": source, "target": mount}]
    return {**definition, **_limits(task.resources)}


def compose_document(plan: Plan) -> dict[str, Any]:
    network = naming.network_name(plan.name)
    document: dict[str, Any] = {
        "name": plan.name,
        "services": {task.name: service(plan, task) for task in plan.tasks},
        # No `ports:` anywhere: the TensorFlow gRPC ports stay inside this network.
        "networks": {network: {"name": network, "labels": {f"{LABEL_PREFIX}cluster": plan.name}}},
    }
    if checkpoint_mount(plan) is not None:
        volume = naming.checkpoint_volume_name(plan.name)
        document["volumes"] = {volume: {"name": volume, "labels": {f"{LABEL_PREFIX}cluster": plan.name}}}
    return document


def render(plan: Plan) -> dict[str, str]:
    header = (
        f"# tfcluster {plan.name} (run {plan.run_id}): one service per task, generated from the spec.\n"
        f"# `tfcluster up` applies it with restarts handed to its supervisor; by hand:\n"
        f"#   docker compose -f {COMPOSE_FILE} up\n"
    )
    return {COMPOSE_FILE: header + yaml.safe_dump(compose_document(plan), sort_keys=False, width=1000)}


def create(**options: Any):
    """A ``ComposeBackend`` (imports the Docker SDK; options are unused)."""
    from launcher.backends.compose_backend import ComposeBackend

    return ComposeBackend()
