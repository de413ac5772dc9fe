"""TensorBoard on the compose backend: one container of the worker image reading the runs' checkpoint volumes.

Contract: ``container_options(plans, host, port)`` is pure: the Docker
``containers.run`` arguments of the board of runs ``plans`` (name -> plan),
named ``naming.tensorboard_name`` of the first run and labelled
``naming.tensorboard_labels`` of each run (so ``down NAME`` removes it).
Each run's checkpoint volume is mounted read-only at ``/runs/<name>``;
its log dir is read there (a ``gs://``/``s3://`` one as it is, with the
spec-level ``env`` of the runs that write to buckets: their credentials;
``LaunchError`` when two of them set a variable differently). Only
TensorBoard's port is published, on ``host`` (127.0.0.1 by default); the
container runs as the image's non-root user with a read-only root
filesystem, no capabilities and a tmpfs ``/tmp``, outside the runs'
networks (the training ports stay unpublished and unreachable).
``run_in_container(client, plans, host, port)`` runs it, yields a ``Board`` once
TensorBoard answers and removes the container when the context is left.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from launcher.backends import tensorboard
from launcher.backends.compose.render import TASK_USER
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import CONTAINER_CHECKPOINT_DIR
from launcher.protocol.checkpoint_layout import is_object_store

RUNS_DIR = "/runs"


def _in_container(name: str, log_dir: str) -> str:
    """Where ``log_dir`` (a path in the run's volume at /checkpoints) is seen in the board's container."""
    if is_object_store(log_dir):
        return log_dir
    inside = posixpath.relpath(log_dir, CONTAINER_CHECKPOINT_DIR)
    return posixpath.normpath(posixpath.join(RUNS_DIR, name, inside))


def container_options(plans: Mapping[str, Plan], host: str, port: int) -> dict[str, Any]:
    dirs = {name: tensorboard.log_dir_of(name, plan.run_config.tensorboard_dir) for name, plan in plans.items()}
    first = next(iter(plans))
    labels = {**naming.tensorboard_labels(first), **{f"{naming.LABEL_TENSORBOARD}.{name}": "true" for name in plans}}
    volumes = {
        naming.checkpoint_volume_name(name): {"bind": posixpath.join(RUNS_DIR, name), "mode": "ro"}
        for name, directory in dirs.items() if not is_object_store(directory)
    }
    return {
        "image": plans[first].board_image(),
        "environment": _bucket_env({name: plan for name, plan in plans.items() if is_object_store(dirs[name])}),
        "command": tensorboard.command({n: _in_container(n, d) for n, d in dirs.items()}, "0.0.0.0", tensorboard.PORT),
        "name": naming.tensorboard_name(first),
        "labels": labels,
        "volumes": volumes,
        "ports": {f"{tensorboard.PORT}/tcp": (host, port)},
        "user": TASK_USER,
        "read_only": True,
        "tmpfs": {"/tmp": "size=64m"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "detach": True,
    }


def _bucket_env(plans: Mapping[str, Plan]) -> dict[str, str]:
    """The spec-level ``env`` of the runs whose log dir is a bucket, merged (the credentials to read it)."""
    merged: dict[str, tuple[str, str]] = {}
    for name, plan in plans.items():
        for key, value in plan.spec.env.items():
            other, seen = merged.setdefault(key, (name, value))
            if seen != value:
                raise LaunchError(f"runs {other!r} and {name!r} set {key} differently: open them on separate boards")
    return {key: value for key, (_, value) in merged.items()}


def board_filters(name: str) -> dict[str, str]:
    """Finds the boards showing run ``name`` (also those of several runs)."""
    return {"label": f"{naming.LABEL_TENSORBOARD}.{name}=true"}


@contextmanager
def run_in_container(client: Any, plans: Mapping[str, Plan], host: str, port: int) -> Iterator[tensorboard.Board]:
    import docker.errors

    options = container_options(plans, host, port)
    _remove_left(client, options["name"])
    try:
        container = client.containers.run(**options)
    except docker.errors.APIError as exc:
        raise LaunchError(f"cannot start TensorBoard: {exc.explanation or exc}") from None
    try:
        address = tensorboard.url(host, port)
        tensorboard.wait_until_serving(address, lambda: _running(container), lambda: _last_log_line(container))
        yield tensorboard.Board(address, lambda: _running(container))
    finally:
        _remove(container)


def _remove_left(client: Any, name: str) -> None:
    """Remove a board of this name that a killed command left (only ours: it carries our label)."""
    import docker.errors

    try:
        left = client.containers.get(name)
    except docker.errors.NotFound:
        return
    if naming.LABEL_TENSORBOARD not in left.labels:
        raise LaunchError(f"a container named {name} exists and is not a tfcluster TensorBoard; remove it first")
    _remove(left)


def _running(container: Any) -> bool:
    import docker.errors

    try:
        container.reload()
    except docker.errors.NotFound:
        return False
    return bool(container.status == "running")


def _last_log_line(container: Any) -> str:
    try:
        lines = [line for line in container.logs(tail=5).decode(errors="replace").splitlines() if line.strip()]
    except Exception:  # noqa: BLE001 - only a hint for the error message
        return "no output"
    return lines[-1] if lines else "no output"


def _remove(container: Any) -> None:
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
