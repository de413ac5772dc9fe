"""Rules that have one home, checked in the source (AST): a second home fails here.

- The progress contract: only ``launcher.protocol.events`` writes or reads the
  event line (its marker) or an event as a dict (an ``"event"`` key).
- A task's state from its exit code: only ``State.of_exit`` chooses between
  succeeded and failed by a code.
- Docker's container statuses of an ended process (``exited``, ``dead``): only
  ``launcher.backends.compose.runtime``.
- Whether a task runs the built-in entrypoint: only ``launcher.plan.programs``
  decides; the entrypoint's command itself is named by the targets and used by
  the planner only (no module compares a command with it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.paths import REPO

PACKAGE = REPO / "launcher"
SOURCES = {path.relative_to(REPO).as_posix(): ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def _is_str(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def event_dict_use(node: ast.AST) -> bool:
    """The event marker, ``x["event"]``, ``x.get("event")`` or ``{"event": ...}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"TFCLUSTER_EVENT(?!_)", node.value):
        return True  # the marker (``TFCLUSTER_EVENT_TOKEN`` is only the variable's name)
    if isinstance(node, ast.Subscript) and _is_str(node.slice, "event"):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and _is_str(node.args[0], "event")
    return isinstance(node, ast.Dict) and any(key is not None and _is_str(key, "event") for key in node.keys)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def state_from_exit_code(node: ast.AST) -> bool:
    """A conditional that yields ``State.SUCCEEDED`` or ``State.FAILED`` on a test of something named ``*code*``."""
    if not isinstance(node, ast.IfExp):
        return False
    branches = _names(node.body) | _names(node.orelse)
    return {"SUCCEEDED", "FAILED"} & branches != set() and any("code" in name.lower() for name in _names(node.test))


def container_status_vocabulary(node: ast.AST) -> bool:
    return _is_str(node, "exited") or _is_str(node, "dead")


def entrypoint_test(node: ast.AST) -> bool:
    """``CONTAINER_ENTRYPOINT`` used, or a ``.entrypoint()`` called: the command of the built-in entrypoint."""
    if isinstance(node, ast.Name) and node.id == "CONTAINER_ENTRYPOINT":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "entrypoint"


def offenders(check: Callable[[ast.AST], bool], homes: set[str], under: str = "launcher/") -> Iterator[str]:
    for path, tree in SOURCES.items():
        if path in homes or not path.startswith(under):
            continue
        for node in ast.walk(tree):
            if check(node):
                yield f"{path}:{getattr(node, 'lineno', '?')}"


@pytest.mark.parametrize("check, homes, under", [
    # progress.py: its ``{"event": ...}`` is the update of a JobProgress field, from typed events
    (event_dict_use, {"launcher/protocol/events.py", "launcher/protocol/progress.py"}, "launcher/"),
    (state_from_exit_code, {"launcher/supervision/status.py"}, "launcher/"),
    (container_status_vocabulary, {"launcher/backends/compose/runtime.py"}, "launcher/backends/"),
    (entrypoint_test, {"launcher/plan/targets.py", "launcher/plan/planner.py"}, "launcher/"),
], ids=["events", "exit-code-to-state", "container-statuses", "entrypoint"])
def test_one_home(check: Callable[[ast.AST], bool], homes: set[str], under: str) -> None:
    assert list(offenders(check, homes, under)) == []


@pytest.mark.parametrize("check, source", [
    (event_dict_use, 'line = "TFCLUSTER_EVENT " + payload'),
    (event_dict_use, 'line = f"TFCLUSTER_EVENT/{token} {payload}"'),
    (event_dict_use, 'kind = event["event"]'),
    (event_dict_use, 'kind = event.get("event")'),
    (event_dict_use, 'payload = {"event": "step", "step": 3}'),
    (state_from_exit_code, "state = State.FAILED if code else State.SUCCEEDED"),
    (state_from_exit_code, "s = State.SUCCEEDED if exit_code == 0 else other"),
    (container_status_vocabulary, 'ended = status in ("exited", "dead")'),
    (entrypoint_test, "runs = task.command == CONTAINER_ENTRYPOINT"),
    (entrypoint_test, "runs = task.command[:3] == target.entrypoint()"),
])
def test_each_check_finds_a_second_home(check: Callable[[ast.AST], bool], source: str) -> None:
    assert any(check(node) for node in ast.walk(ast.parse(source)))


def test_the_checks_see_the_source() -> None:
    """Guard against a vacuous pass: each home holds what its check looks for."""
    homes = {"launcher/protocol/events.py": event_dict_use, "launcher/supervision/status.py": state_from_exit_code,
             "launcher/backends/compose/runtime.py": container_status_vocabulary,
             "launcher/plan/planner.py": entrypoint_test}
    for path, check in homes.items():
        assert any(check(node) for node in ast.walk(SOURCES[path])), path
    assert Path(REPO / "launcher" / "plan" / "programs.py").is_file()
