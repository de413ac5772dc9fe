"""The package's import graph, read from the source (AST): every import at any depth of a file, absolute and
relative, and every string that names a module (``import_module("launcher...")``, ``python -m launcher...``, a
registry's ``"module:Class"``), which counts as an import from where it is written. An import by a variable
(which no reading resolves) is declared in ``DYNAMIC_IMPORTS``.

Layers, bottom up: ``errors``; ``spec``; ``protocol``; ``plan``; ``supervision``;
``backends``; ``cli`` and ``api`` on top. An arrow may only point down (or stay
inside its own package); the TensorFlow entrypoint ``worker`` (and the
``examples`` it runs, and ``progress``, the user programs' reporting API) import
only ``spec`` and ``protocol`` of the controller.
No module imports itself back, directly or through others, and no package
does either.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers import sources
from helpers.paths import REPO

PACKAGE = REPO / "launcher"
#: Rank of each top-level part of ``launcher``; a module may import parts of lower or equal rank only.
RANKS = {"errors": 0, "spec": 1, "protocol": 2, "plan": 3, "supervision": 4, "backends": 5, "api": 6, "cli": 7,
         "__main__": 8}
#: The TensorFlow side: imported by no controller layer.
WORKER_SIDE = ("worker", "examples", "progress")
WORKER_MAY_IMPORT = {"spec", "protocol", *WORKER_SIDE}
MAX_TOP_LEVEL_MODULES = 8


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}
#: A string that is a module's whole name, as ``import_module``, ``python -m`` and entry points
#: (``module:attribute``) take it.
MODULE_STRING = re.compile(r"(launcher(?:\.\w+)+)(?::\w+)?")


def references(module: str, source: str, is_package: bool = False) -> tuple[set[str], set[str]]:
    """The ``launcher`` modules that ``source`` (of ``module``) imports, and those it names in strings.

    Imports: at any depth of the file, absolute and relative (``from a import b`` counts ``a.b`` when that is
    a module, else ``a``). Strings: a constant whose whole value names a module (``"launcher.x.y"``, or
    ``"launcher.x.y:Name"``): a dynamic import, a ``python -m`` command or a lookup table turns it into an import,
    so it counts as one from the file it is written in (prose that mentions a module does not). Both keep
    only modules that exist.
    """
    here = module if is_package else module.rpartition(".")[0]  # where a relative import starts
    imported, named = set(), set()
    for node in ast.walk(sources.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                imported.add(candidate if candidate in MODULES else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_STRING.fullmatch(node.value)
            if match:
                named.add(match.group(1))
    return imported & MODULES, named & MODULES


REFERENCES = {module_name(p): references(module_name(p), p.read_text(), p.name == "__init__.py") for p in PACKAGE.rglob("*.py")}
IMPORTS = {module: imported for module, (imported, _) in REFERENCES.items()}
NAMED = {module: named for module, (_, named) in REFERENCES.items()}
#: Every arrow: an import or a module named in a string.
GRAPH = {module: IMPORTS[module] | NAMED[module] for module in REFERENCES}
#: The TensorFlow side named by a controller layer as the program a task runs (``python -m``, the spec's
#: default training module): another process imports it, never the controller. Strings only: an import of
#: the same module from there fails.
PROGRAMS = {
    ("launcher.plan.targets", "launcher.worker"),  # the built-in entrypoint's command
    ("launcher.plan.targets", "launcher.worker.standby"),  # a restarted task's standby
    ("launcher.plan.targets", "launcher.worker.zygote"),  # the one import local standbys' tasks are forked from
    ("launcher.plan.targets", "launcher.worker.agent"),  # a container task's main process
    ("launcher.plan.targets", "launcher.worker.agent_relay"),  # a compose task's agent, asked by docker exec
    ("launcher.spec.models", "launcher.examples.mnist"),  # training.module's default
}
#: Imports of a module named by a variable, which no reading of the source resolves: each says what it imports.
DYNAMIC_IMPORTS = {
    "launcher.backends": "the backend classes named in _CLASSES (strings: checked as arrows here)",
    "launcher.worker.standby": "ENTRYPOINT_MODULE, a string: checked as an arrow here",
    "launcher.worker.zygote": "launcher.worker.standby's ENTRYPOINT_MODULE, in each forked child",
    "launcher.worker.usercode": "the user's training.module (not tfcluster's, but for the default example)",
}
IMPORT_FUNCTIONS = {"import_module", "__import__", "run_module", "find_spec", "load_module"}


def dynamic_imports(path: Path) -> list[int]:
    """Lines of ``path`` that import a module named by something other than a string constant."""
    lines = []
    for node in ast.walk(sources.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in IMPORT_FUNCTIONS:
                lines.append(node.lineno)
    return lines


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (each reported once, from where it was closed)."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_module_cycle() -> None:
    assert cycles(GRAPH) == []


def package_of(module: str) -> str:
    """The package a module lives in (``launcher.backends.local`` for its modules); a module directly in
    ``launcher`` is its own node, so ``launcher.errors`` and ``launcher.api`` are told apart."""
    path = REPO / Path(*module.split("."))
    if path.is_dir() or module.count(".") == 1:
        return module
    return module.rsplit(".", 1)[0]


def registry_arrow(module: str, target: str) -> bool:
    """A package's ``__init__`` naming a module of its own subpackages in a string: a registry that imports
    them when asked (``launcher.backends``' backend classes). Those subpackages use the package's other
    modules, so as an import it would be a package cycle; by name it is none (they never import the registry)."""
    return target in NAMED[module] and target not in IMPORTS[module] and target.startswith(module + ".") \
        and (PACKAGE.parent / Path(*module.split("."))).is_dir()


def test_no_package_cycle() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        source = package_of(module)
        packages.setdefault(source, set()).update(package_of(t) for t in targets
                                                  if package_of(t) != source and not registry_arrow(module, t))
    assert cycles(packages) == []
    assert registry_arrow("launcher.backends", "launcher.backends.local.backend")
    assert not registry_arrow("launcher.backends", "launcher.backends.interface")  # imported, not named


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if part(m) in RANKS))
def test_arrows_point_down(module: str) -> None:
    rank = RANKS[part(module)]
    upward = sorted(t for t in GRAPH[module] if part(t) in RANKS and RANKS[part(t)] > rank)
    assert not upward, f"{module} imports a higher layer: {upward}"
    tensorflow_side = sorted(t for t in GRAPH[module] if part(t) in WORKER_SIDE
                             and (t in IMPORTS[module] or (module, t) not in PROGRAMS))
    assert not tensorflow_side, f"{module} imports the TensorFlow side: {tensorflow_side}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if part(m) in WORKER_SIDE))
def test_the_worker_imports_only_what_it_shares_with_the_controller(module: str) -> None:
    assert {part(t) for t in GRAPH[module]} <= WORKER_MAY_IMPORT, GRAPH[module]


def test_the_top_level_stays_small() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_dynamic_import_is_declared(path: Path) -> None:
    lines = dynamic_imports(path)
    assert not lines or module_name(path) in DYNAMIC_IMPORTS, f"{module_name(path)} imports a module by a variable at {lines}"


def test_the_declarations_are_current() -> None:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    assert {module for module in DYNAMIC_IMPORTS if dynamic_imports(paths[module])} == set(DYNAMIC_IMPORTS)
    assert {(module, target) for module, target in PROGRAMS if target in NAMED[module]} == PROGRAMS


def test_the_graph_is_read_at_all() -> None:
    """Guards the guard: known arrows are found, including one inside a function, and modules named in strings."""
    assert "launcher.plan.planner" in GRAPH["launcher.api"]
    assert "launcher.backends.kubernetes.manifests" in GRAPH["launcher.cli.commands"]  # imported in a function
    assert "launcher.backends.slurm.backend" in NAMED["launcher.backends"]  # "module:Class", for import_module
    assert "launcher.worker" in NAMED["launcher.plan.targets"]  # python -m
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


SOURCE = """
\"\"\"Prose naming launcher.api is no arrow.\"\"\"
from . import targets
from .. import errors
from ..spec import models
from .planner import Plan
import importlib

def late():
    importlib.import_module("launcher.backends.local.backend")
    return ["python", "-m", "launcher.cli"], "launcher.nothing_like_this", "launcher.api:plan"
"""


def test_relative_imports_and_module_strings_are_arrows() -> None:
    """A relative import resolves against its package (a package's own ``__init__`` is in it); a string naming a
    module is an arrow; prose is not."""
    imported, named = references("launcher.plan.example", SOURCE)
    assert imported == {"launcher.plan.targets", "launcher.errors", "launcher.spec.models", "launcher.plan.planner"}
    assert named == {"launcher.backends.local.backend", "launcher.cli", "launcher.api"}
    assert references("launcher.plan", "from . import targets", is_package=True)[0] == {"launcher.plan.targets"}
