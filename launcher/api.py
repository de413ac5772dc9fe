"""The Python API under the CLI: load a spec, plan it, dry-run it, launch it.

Contract: everything the CLI does is a call here, so notebooks and other
tools get the same behaviour. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from launcher.backends import backend_module
from launcher.loader import load_spec, parse_spec
from launcher.plan import Plan, make_plan
from launcher.spec import ClusterSpec
from launcher.targets import BackendKind, target_for

__all__ = ["load_spec", "parse_spec", "plan", "dry_run", "plan_document", "new_run_id"]


def new_run_id() -> str:
    """A fresh id for one launch (time-ordered, unique)."""
    return f"{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


def plan(
    spec: ClusterSpec | str | Path,
    backend: BackendKind | str = BackendKind.LOCAL,
    run_id: str = "manual",
    *,
    launching: bool = False,
) -> Plan:
    """The full plan for ``spec`` on ``backend``, with the backend's rendered files.

    ``launching`` picks free local ports; previews use sequential ones so
    dry-run output is reproducible.
    """
    if not isinstance(spec, ClusterSpec):
        spec = load_spec(spec)
    kind = BackendKind(backend)
    result = make_plan(spec, target_for(kind, spec, free_ports=launching), run_id)
    artifacts = backend_module(kind).render(result)
    return result.model_copy(update={"artifacts": artifacts}) if artifacts else result


def dry_run(plan_: Plan) -> dict[str, Any]:
    """The dry-run contract other tools rely on, exactly:
    ``{"tasks": [{"name", "type", "index", "address", "tf_config"}, ...]}`` (``dry-run -o json``)."""
    return {
        "tasks": [
            {"name": t.name, "type": t.type.value, "index": t.index, "address": t.address, "tf_config": plan_.tf_config(t)}
            for t in plan_.tasks
        ]
    }


def plan_document(plan_: Plan) -> dict[str, Any]:
    """Everything that would be launched (``dry-run -o plan`` and the text view): the dry-run
    tasks with their image, command and environment, plus the cluster's settings and rendered files."""
    tasks = [
        {**entry, "image": t.image, "command": t.command, "env": t.env}
        for entry, t in zip(dry_run(plan_)["tasks"], plan_.tasks, strict=True)
    ]
    return {
        "tasks": tasks,
        "name": plan_.name,
        "backend": plan_.backend.value,
        "strategy": plan_.strategy.value,
        "strategy_note": plan_.strategy_note,
        "run_id": plan_.run_id,
        "checkpoint_dir": plan_.run_config.checkpoint_dir,
        "artifacts": plan_.artifacts,
    }
