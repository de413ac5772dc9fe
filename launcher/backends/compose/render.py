"""Docker Compose backend: one container per task on a private network, supervised by tfcluster.

Contract: ``render(plan)`` is pure and deterministic: ``{"docker-compose.yaml": ...}`` with one
service per task (service = container = hostname = task name), its command (under the task's agent where it can
be: ``launcher.plan.held_program.container_program``; by hand the agent runs it once, under ``tfcluster up`` it
restarts it in place) and environment, one private network publishing no host port, the checkpoint volume, limits,
labels, a non-root user, the hardened TensorBoard container, ``init: true`` and ``stop_grace_period`` = the save grace.
Storage problems (``ComposeTarget.storage``) are reported by ``validate``; rendering never raises.
Under ``tfcluster up`` an override (``runtime.override_document``) sets ``restart: "no"``: the shared supervisor is
the only restarter, and gives each task's agent its ``STACKS_PORT``, which holds it for restarts in place; the
rendered restart policy is for running the file by hand. Why: docs/architecture.md (Decisions).
"""

from __future__ import annotations

from typing import Any

import yaml

from launcher.backends.escaping import literal
from launcher.plan import naming
from launcher.plan.held_program import container_program
from launcher.plan.images import TASK_UID
from launcher.plan.planner import Plan, Task
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR
from launcher.protocol.checkpoint_layout import is_object_store
from launcher.spec.models import Resources
from launcher.spec.quantities import byte_count

COMPOSE_FILE = "docker-compose.yaml"
#: The worker image's non-root user (``TASK_UID``) and its home.
TASK_USER = f"{TASK_UID}:{TASK_UID}"
TASK_HOME = "/home/tfcluster"
#: What a task may write besides its volumes (the root filesystem is read-only): scratch space, and the
#: home where Keras, pip and others keep their caches (~/.keras, ~/.cache, ~/.config), the task user's only.
TASK_TMPFS = ["/tmp", f"{TASK_HOME}:uid={TASK_UID},gid={TASK_UID},mode=0700"]
PROJECT_LABEL = "com.docker.compose.project"
#: The service key of a task's command, by ``Task.replaces_entrypoint``: after the image's ENTRYPOINT or in its place.
_COMMAND_KEY = {False: "command", True: "entrypoint"}


def docker_restart_policy(plan: Plan) -> str:
    """The spec's restart policy in Docker's terms, for runs of the file by hand.

    ``never`` (or a zero budget) is ``no``; ``on-failure``, ``exit-code`` and
    ``always`` become ``on-failure:<max_restarts>``: Docker cannot retry by
    exit code, and its ``always`` would restart a chief that finished.
    """
    budget = plan.policy.budget()
    return "no" if budget == 0 else f"on-failure:{budget}"


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
    """Where the checkpoint volume is mounted: always ``/checkpoints``; None for object-store dirs."""
    return None if is_object_store(plan.run_config.checkpoint_dir) else CONTAINER_CHECKPOINT_DIR


def service(plan: Plan, task: Task) -> dict[str, Any]:
    """One task's service. Strings from the spec pass through ``literal``: Compose would expand ``$VAR``."""
    network = naming.network_name(plan.name)
    mount = checkpoint_mount(plan)
    definition: dict[str, Any] = {
        "image": literal(task.image),
        "container_name": task.name,
        "hostname": task.name,
        # after the image's ENTRYPOINT (under the task's agent where it can be), or in its place (a TFJob's command);
        # none: the image's own CMD
        **({_COMMAND_KEY[task.replaces_entrypoint]: [literal(arg) for arg in container_program(plan, task)]}
           if task.command else {}),
        "environment": {key: literal(value) for key, value in plan.task_env(task).items()},
        "user": TASK_USER,
        "read_only": True,
        "tmpfs": list(TASK_TMPFS),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "init": True,
        # docker stop: SIGTERM reaches python (docker-init and the image's tini forward it to their
        # exec-form child), which saves on it; SIGKILL only after the save grace.
        "stop_grace_period": f"{plan.policy.save_grace_seconds}s",
        "restart": docker_restart_policy(plan),
        "networks": [network],
        "labels": naming.labels(plan.name, plan.run_id, task.type, task.index),
    }
    volumes: list[dict[str, Any]] = []
    if mount is not None:
        volumes.append({"type": "volume", "source": naming.checkpoint_volume_name(plan.name), "target": mount})
    if plan.workspace is not None:
        # An anonymous volume, the container's own: Docker fills it with the image's workspace, writable.
        volumes.append({"type": "volume", "target": plan.workspace.workdir})
    if volumes:
        definition["volumes"] = volumes
    return {**definition, **_limits(task.resources)}


def compose_document(plan: Plan) -> dict[str, Any]:
    network = naming.network_name(plan.name)
    document: dict[str, Any] = {
        "name": plan.name,
        "services": {task.name: service(plan, task) for task in plan.tasks},
        # No `ports:` anywhere: the TensorFlow gRPC ports stay inside this network.
        "networks": {network: {"name": network, "labels": naming.labels(plan.name, plan.run_id)}},
    }
    if checkpoint_mount(plan) is not None:
        volume = naming.checkpoint_volume_name(plan.name)
        document["volumes"] = {volume: {"name": volume, "labels": naming.labels(plan.name, plan.run_id)}}
    return document


def render(plan: Plan) -> dict[str, str]:
    header = (
        f"# tfcluster {plan.name} (run {plan.run_id}): one service per task, generated from the spec.\n"
        f"# `tfcluster up` applies it with restarts handed to its supervisor; by hand:\n"
        f"#   docker compose -f {COMPOSE_FILE} up\n"
    )
    return {COMPOSE_FILE: header + yaml.safe_dump(compose_document(plan), sort_keys=False, width=1000)}
