"""Every backend that runs a supervisor process runs the one harness: no backend handles signals or writes a
failed status itself, and the process's command names the class the registry maps the backend's kind to."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.paths import REPO
from launcher.backends import backend_class
from launcher.backends.api import Backend
from launcher.errors import LaunchError
from launcher.plan.targets import BackendKind
from launcher.supervision import harness

BACKENDS = REPO / "launcher" / "backends"
#: What only the harness may do in a supervisor process.
HARNESS_ONLY = {"Supervisor", "signal", "set_wakeup_fd"}


def hosts(kind: BackendKind) -> bool:
    return backend_class(kind).host.__func__ is not Backend.host.__func__  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_a_backend_hosting_a_supervisor_process_is_started_through_the_harness_by_its_registered_class(
        kind: BackendKind) -> None:
    cls = backend_class(kind)
    if not hosts(kind):
        with pytest.raises(LaunchError, match="runs no tfcluster supervisor process"):
            cls.host(None, None, False)  # type: ignore[arg-type]
        return
    argv = harness.command(cls, "python")
    assert argv[:3] == ["python", "-m", "launcher.supervision"]
    assert harness.hosting(argv[3]) is cls


def test_every_backend_but_kubernetes_hosts_a_supervisor_process() -> None:
    assert {kind for kind in BackendKind if hosts(kind)} == {BackendKind.LOCAL, BackendKind.COMPOSE, BackendKind.SLURM}


def harness_work(path: Path) -> list[str]:
    """Where ``path`` builds a ``Supervisor``, installs a signal handler or is a program of its own (``__main__``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in HARNESS_ONLY:
                found.append(f"{name}() at line {node.lineno}")
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__":
            found.append(f"a __main__ at line {node.lineno}")
    return found


@pytest.mark.parametrize("path", sorted(BACKENDS.rglob("*.py")), ids=lambda p: p.relative_to(BACKENDS).as_posix())
def test_no_backend_module_supervises_or_handles_signals_itself(path: Path) -> None:
    assert harness_work(path) == []


def test_the_check_sees_what_it_forbids() -> None:
    """Guards the guard: the harness does all three (its ``__main__`` is ``launcher.supervision.__main__``)."""
    source = REPO / "launcher" / "supervision"
    assert {w.split()[0] for w in harness_work(source / "harness.py")} == {"Supervisor()", "signal()",
                                                                         "set_wakeup_fd()"}
