"""Which backend (and options) each launched cluster lives on, so ``status NAME`` needs no flags.

Contract: ``record`` is called by ``up`` after a successful submit; ``lookup``
returns what was recorded or None. State lives under ``naming.home()``
(``$TFCLUSTER_HOME``, default ``~/.tfcluster``), one small JSON file per cluster name,
private to its owner (``launcher.supervision.statefile``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.statefile import private_dir, read_json, write_json


def _entry(name: str) -> Path:
    return naming.home() / "clusters" / f"{naming.cluster_name(name)}.json"


def record(name: str, backend: BackendKind, options: dict[str, Any]) -> None:
    path = _entry(name)
    private_dir(path.parent)
    write_json(path, {"backend": backend.value, "options": options})


def lookup(name: str) -> tuple[BackendKind, dict[str, Any]] | None:
    data = read_json(_entry(name))
    if not isinstance(data, dict):
        return None
    return BackendKind(data["backend"]), data.get("options", {})


def forget(name: str) -> None:
    _entry(name).unlink(missing_ok=True)
