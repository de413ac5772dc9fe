"""Which backend (and options) each launched cluster lives on, so ``status NAME`` needs no flags.

Contract: ``record`` is called by ``up`` after a successful submit; ``lookup``
returns what was recorded or None. State lives under ``naming.home()``
(``$TFCLUSTER_HOME``, default ``~/.tfcluster``), one small JSON file per cluster name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.plan import naming
from launcher.plan.targets import BackendKind


def _entry(name: str) -> Path:
    return naming.home() / "clusters" / f"{name}.json"


def record(name: str, backend: BackendKind, options: dict[str, Any]) -> None:
    path = _entry(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"backend": backend.value, "options": options}))


def lookup(name: str) -> tuple[BackendKind, dict[str, Any]] | None:
    try:
        data = json.loads(_entry(name).read_text())
    except (OSError, ValueError):
        return None
    return BackendKind(data["backend"]), data.get("options", {})


def forget(name: str) -> None:
    _entry(name).unlink(missing_ok=True)
