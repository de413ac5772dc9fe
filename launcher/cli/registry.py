"""Which backend (and options) each launched cluster lives on, so ``status NAME`` needs no flags.

Contract: ``record`` is called by ``up`` after a successful submit, ``ready`` before it (the registry's
directory made, or ``UnsafeStatePath`` before anything starts); ``lookup`` returns what was recorded or None.
State lives under ``naming.home()`` (``$TFCLUSTER_HOME``, default ``~/.tfcluster``), one small JSON file per
cluster name, private to its owner and in directories of its own (``launcher.supervision.statefile``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.statefile import owned_dir, private_dir, read_json, write_json


def _directory() -> Path:
    return naming.home() / "clusters"


def _entry(name: str) -> Path:
    return owned_dir(_directory()) / f"{naming.cluster_name(name)}.json"


def ready() -> None:
    private_dir(_directory())


def record(name: str, backend: BackendKind, options: dict[str, Any]) -> None:
    ready()
    write_json(_entry(name), {"backend": backend.value, "options": options})


def lookup(name: str) -> tuple[BackendKind, dict[str, Any]] | None:
    data = read_json(_entry(name))
    if not isinstance(data, dict):
        return None
    return BackendKind(data["backend"]), data.get("options", {})


def forget(name: str) -> None:
    _entry(name).unlink(missing_ok=True)
