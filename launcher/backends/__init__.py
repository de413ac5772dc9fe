"""Backend registry: one package per backend, imported only when asked for.

``dry-run --backend local`` never loads the Docker or Kubernetes SDKs: a
backend's class module imports its SDK lazily, and only the asked-for
backend's module is imported at all. A new backend is one package plus one
line in ``_CLASSES``; its options (what ``create`` takes) are one small model,
its class's ``Options`` (``launcher.backends.interface.BackendOptions``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from pydantic import ValidationError

from launcher.backends.interface import Backend
from launcher.errors import LaunchError
from launcher.plan.targets import BackendKind

_CLASSES = {
    BackendKind.LOCAL: "launcher.backends.local.backend:LocalBackend",
    BackendKind.COMPOSE: "launcher.backends.compose.backend:ComposeBackend",
    BackendKind.K8S: "launcher.backends.kubernetes.backend:KubernetesBackend",
    BackendKind.SLURM: "launcher.backends.slurm.backend:SlurmBackend",
}


def backend_class(kind: BackendKind) -> type[Backend]:
    module, name = _CLASSES[kind].split(":")
    cls: type[Backend] = getattr(importlib.import_module(module), name)
    return cls


def get_backend(kind: BackendKind | str, options: Mapping[str, object] | None = None) -> Backend:
    """A backend of ``kind`` connected to its runtime with ``options`` (its ``Options``: e.g. ``namespace`` for k8s);
    ``LaunchError`` (one line) for an option the backend does not have."""
    kind = BackendKind(kind)
    cls = backend_class(kind)
    try:
        settings = cls.Options.model_validate(dict(options or {}))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise LaunchError(f"{kind.value} backend options: {problems}") from None
    return cls.create(settings)
