"""Every backend that runs a supervisor process runs the one harness: no backend handles signals or writes a
failed status itself, and the process's command names the backend's kind, which the registry resolves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import sources
from helpers.paths import REPO
from launcher.backends import backend_class, supervisor_process
from launcher.backends.interface import Backend
from launcher.backends.supervisor_process import main
from launcher.plan.targets import BackendKind
from launcher.supervision import harness

BACKENDS = REPO / "launcher" / "backends"
#: What only the harness may do in a supervisor process.
HARNESS_ONLY = {"Supervisor", "signal", "set_wakeup_fd"}


def hosts(kind: BackendKind) -> bool:
    """The backend's class gives the harness a ``host`` of its own (a classmethod, or its ``supervise.host``)."""
    return next(cls for cls in backend_class(kind).__mro__ if "host" in vars(cls)) is not Backend


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_a_backend_hosting_a_supervisor_process_is_started_through_the_harness_by_its_kind(
        kind: BackendKind, monkeypatch: pytest.MonkeyPatch) -> None:
    cls = backend_class(kind)
    process = supervisor_process.process(cls)
    assert list(process.command) == [sys.executable, "-m", "launcher.backends.supervisor_process", kind.value]
    assert process.host == cls.host and process.state_of == cls.state_of
    states: dict[str, object] = {}
    monkeypatch.setattr(cls, "state_of", lambda target: states.setdefault(target, object()))
    ran: list[tuple[object, object, bool]] = []
    monkeypatch.setattr(harness, "run_supervisor", lambda state, host, adopt: ran.append((state, host, adopt)) or 0)
    assert main.main([*process.command[3:], "ns/demo", harness.ADOPT_FLAG]) == 0
    assert ran == [(states["ns/demo"], cls.host, True)]


def test_a_backend_keeps_its_supervisors_state_in_the_directory_its_command_line_names_unless_it_says_otherwise(
) -> None:
    state = Backend.state_of("/state")
    assert type(state) is harness.StateDir and state.root == Path("/state")
    assert state.record is state.files and state.files.plan == Path("/state/plan.json")  # the run's record: its files


@pytest.mark.parametrize(("argv", "says"), [
    (["nomad", "/state"], "unknown backend 'nomad' (one of: local, compose, k8s, slurm)"),
    (["--rounds", "k8s", "demo"], "unrecognized arguments: --rounds"),
    (["local"], "the following arguments are required: target"),
])
def test_a_command_line_it_cannot_run_is_one_line_and_exit_2(argv: list[str], says: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"error: {says}; usage: "), err


def test_the_program_runs_as_a_module() -> None:
    """``python -m`` reaches ``main`` (its ``__main__``): an unknown kind exits 2 with its one line."""
    result = subprocess.run([sys.executable, "-m", "launcher.backends.supervisor_process", "nomad", "/nowhere"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: unknown backend 'nomad'"), result.stderr


def test_every_backend_hosts_a_supervisor_process() -> None:
    """Kubernetes too since issue #35: its supervisor pod (or this machine) runs the one supervisor."""
    assert all(hosts(kind) for kind in BackendKind)


def harness_work(path: Path) -> list[str]:
    """Where ``path`` builds a ``Supervisor``, installs a signal handler or is a program of its own (``__main__``)."""
    found = []
    for node in ast.walk(sources.parse(path.read_text())):
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

