"""Names that say one thing, read from the source (AST): no public class of ``launcher`` is defined twice, a module
name recurs only where every module of that name is the same thing in another place, and ``rules`` names nothing
but the spec's ``restart.rules`` (docs/architecture.md, Names).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from helpers import sources
from helpers.paths import REPO

PACKAGE = REPO / "launcher"
#: Module names that recur on purpose, each meaning one thing wherever it is.
RECURRING = {
    "backend": "each backend's Backend subclass",
    "target": "each backend's Target",
    "supervise": "each backend's supervisor entry",
    "runtime": "the Runtime protocol and each backend's Runtime",
    "status": "a run's status: its types, the report's typed reading, each backend's view",
    "state": "each backend's state store",
    "follow": "each backend's logs -f",
    "tensorboard": "serving TensorBoard: what the backends share, and each backend's",
    "main": "a program's main (the worker's, the supervisor process's)",
    "workspace": "the user's workspace: in the plan, and shipped by the backends",
    "standby": "a task's standby: how a runtime calls it, and the standby itself",
    "history": "a run's history for report, and Kubernetes' reading of it",
    "preemption": "preemption: Slurm's handling, and the task's save on the notice",
}
SPEC_FIELD = "rules"


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]


def _trees() -> dict[Path, ast.Module]:
    return {p: sources.parse(p.read_text(), str(p)) for p in PACKAGE.rglob("*.py")}


def test_no_public_class_is_defined_twice() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path, tree in _trees().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes[node.name].append(path.relative_to(REPO).as_posix())
    assert {name: paths for name, paths in homes.items() if len(paths) > 1} == {}


def test_a_module_name_recurs_only_where_it_means_one_thing() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        places[path.stem].append(path.relative_to(REPO).as_posix())
    recurring = {name: paths for name, paths in places.items() if len(paths) > 1}
    assert {name: paths for name, paths in recurring.items() if name not in RECURRING} == {}
    assert set(RECURRING) <= set(recurring), "a name listed as recurring that no longer recurs: drop it"


def test_rules_names_only_the_spec_field() -> None:
    """No module, class, function or constant is called ``rules`` (a Kubernetes manifest's ``"rules"`` key is a string)."""
    named = [p.relative_to(REPO).as_posix() for p in _modules() if p.stem == SPEC_FIELD]
    for path, tree in _trees().items():
        for node in ast.walk(tree):
            name = getattr(node, "name", None) if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else None
            if isinstance(node, ast.Assign) and node.col_offset == 0:
                name = next((t.id for t in node.targets if isinstance(t, ast.Name)), None)
            if name and name.lower().removeprefix("default_") in (SPEC_FIELD, "rule"):
                named.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno} {name}")
    assert named == []
