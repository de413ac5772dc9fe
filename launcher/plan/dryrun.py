"""A dry run: a plan together with the files its backend rendered from it.

Contract: ``DryRun`` is what ``dry-run`` shows and exactly what
``Backend.submit`` applies (after TorchX's ``submit_dryrun`` -> ``schedule``):
a backend renders once, into ``files``, and never renders again at submit.
``supervised_from_here`` says a run's supervisor runs on the launching machine (``up --detach`` warns), decided with the rest.
``admin_files`` are rendered beside ``files`` (``render`` writes both) but never applied by ``submit``: a cluster
administrator applies them once (the Kubernetes admission policy).
``tasks_document`` is the stable ``dry-run -o json`` contract;
``plan_document`` is everything (``dry-run -o plan`` and the text view).
``json_chunks(entries, settings)`` writes such a document (``{"tasks":
[...entries], **settings}``) task by task, exactly as ``json.dumps(document,
indent=2)`` would: every TF_CONFIG lists the whole cluster, so the output is
quadratic in the number of tasks, and only streaming keeps memory linear.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from launcher.plan.planner import Plan, Task


class DryRun(BaseModel):
    """``plan`` and the files (name -> content) its backend applies; empty for backends without files."""

    model_config = ConfigDict(frozen=True)

    plan: Plan
    files: dict[str, str] = {}
    #: True if the run's supervisor runs on the launching machine though its tasks run elsewhere (Kubernetes with
    #: ``kubernetes.supervisor: false``): while that machine is off, nothing supervises the run. ``up --detach`` warns.
    supervised_from_here: bool = False
    #: Files an administrator applies once, for every run, which ``submit`` never applies (name -> content).
    admin_files: dict[str, str] = {}


def task_entry(plan: Plan, task: Task) -> dict[str, Any]:
    """One task of the ``dry-run -o json`` contract."""
    return {"name": task.name, "type": task.type.value, "index": task.index, "address": task.address,
            "tf_config": plan.tf_config(task)}


def task_entries(plan: Plan) -> Iterator[dict[str, Any]]:
    """The ``tasks`` of ``tasks_document``, one at a time."""
    return (task_entry(plan, t) for t in plan.tasks)


def tasks_document(plan: Plan) -> dict[str, Any]:
    """The dry-run contract other tools rely on, exactly:
    ``{"tasks": [{"name", "type", "index", "address", "tf_config"}, ...]}`` (``dry-run -o json``)."""
    return {"tasks": list(task_entries(plan))}


def plan_entries(plan: Plan) -> Iterator[dict[str, Any]]:
    """The ``tasks`` of ``plan_document``, one at a time: the contract's entries with image, command and env,
    ``replaces_entrypoint: true`` for a command that runs in place of the image's ENTRYPOINT and
    ``standby_command`` for a task that keeps a standby to restart in."""
    return ({**task_entry(plan, t), "image": t.image, "command": t.command,
             **({"replaces_entrypoint": True} if t.replaces_entrypoint else {}),
             **({"standby_command": t.standby_command} if t.standby_command else {}), "env": t.env}
            for t in plan.tasks)


def plan_document(dry_run: DryRun) -> dict[str, Any]:
    """Everything that would be launched: the contract's tasks with their image, command and
    environment, plus the cluster's settings and rendered files."""
    return {"tasks": list(plan_entries(dry_run.plan)), **plan_settings(dry_run)}


def plan_settings(dry_run: DryRun) -> dict[str, Any]:
    """``plan_document`` without its tasks: the cluster's settings and rendered files (``admin_artifacts``: those an
    administrator applies, when there are any)."""
    plan = dry_run.plan
    return {
        "name": plan.name,
        "backend": plan.backend.value,
        "strategy": plan.strategy.value,
        "strategy_note": plan.strategy_note,
        "run_id": plan.run_id,
        "workdir": plan.workdir,
        "checkpoint_dir": plan.run_config.checkpoint_dir,
        "workspace": plan.workspace.model_dump(mode="json") if plan.workspace else None,
        "tensorboard_dir": plan.run_config.tensorboard_dir,
        "artifacts": dry_run.files,
        **({"admin_artifacts": dry_run.admin_files} if dry_run.admin_files else {}),
    }


def json_chunks(entries: Iterable[dict[str, Any]], settings: dict[str, Any] | None = None,
                shared: Iterable[Any] = ()) -> Iterator[str]:
    """``json.dumps({"tasks": list(entries), **settings}, indent=2)`` in pieces, one task entry at a time.

    The containers in ``shared`` (the training ``cluster`` that every
    TF_CONFIG holds) are encoded once per depth, not once per entry.
    """
    cache: dict[tuple[int, int], str] = {}
    shared_ids = {id(value) for value in shared}
    yield '{\n  "tasks": ['
    separator = "\n    "
    for entry in entries:
        yield separator + _encode(entry, 2, shared_ids, cache)
        separator = ",\n    "
    yield "]" if separator == "\n    " else "\n  ]"
    for key, value in (settings or {}).items():
        yield f",\n  {json.dumps(key)}: {_encode(value, 1, shared_ids, cache)}"
    yield "\n}"


def _encode(value: Any, level: int, shared: set[int], cache: dict[tuple[int, int], str]) -> str:
    """``value`` exactly as ``json.dumps(indent=2)`` writes it nested ``level`` deep (shared ones from ``cache``)."""
    if not isinstance(value, dict | list) or not value:
        return json.dumps(value)
    key = (id(value), level)
    if key in cache:
        return cache[key]
    inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
    if isinstance(value, list):
        text = "[" + inner + ("," + inner).join(_encode(v, level + 1, shared, cache) for v in value) + outer + "]"
    elif all(isinstance(k, str) for k in value):
        items = [f"{json.dumps(k)}: {_encode(v, level + 1, shared, cache)}" for k, v in value.items()]
        text = "{" + inner + ("," + inner).join(items) + outer + "}"
    else:  # keys json.dumps converts (numbers, None): let it
        text = json.dumps(value, indent=2).replace("\n", outer)
    if id(value) in shared:
        cache[key] = text
    return text
