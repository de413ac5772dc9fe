"""Backend registry. Each backend is one module exposing ``render(plan)`` and ``create(**options)``.

Modules are imported only when asked for, so ``dry-run --backend local`` never
loads the Docker or Kubernetes SDKs.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from launcher.backends.api import Backend
from launcher.targets import BackendKind

_MODULES = {
    BackendKind.LOCAL: "launcher.backends.local",
    BackendKind.COMPOSE: "launcher.backends.compose",
    BackendKind.K8S: "launcher.backends.kubernetes",
}


def backend_module(kind: BackendKind) -> ModuleType:
    return importlib.import_module(_MODULES[kind])


def get_backend(kind: BackendKind, **options: Any) -> Backend:
    """A ready backend of ``kind``; options are backend-specific (e.g. namespace, context for k8s)."""
    return backend_module(kind).create(**options)
