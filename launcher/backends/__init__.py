"""Backend registry: one package per backend, imported only when asked for.

``dry-run --backend local`` never loads the Docker or Kubernetes SDKs: a
backend's class module imports its SDK lazily, and only the asked-for
backend's module is imported at all. A new backend is one package plus one
line in ``_CLASSES``.
"""

from __future__ import annotations

import importlib
from typing import Any

from launcher.backends.api import Backend
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


def get_backend(kind: BackendKind, **options: Any) -> Backend:
    """A backend of ``kind`` connected to its runtime; options are backend-specific (e.g. namespace for k8s)."""
    return backend_class(kind).create(**options)
