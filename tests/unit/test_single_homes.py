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

Each check looks for what the rule is about in every syntactic form that can do it (an expression or a
statement, a dict or a ``match``), and its forms are tested on snippets, both ways.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import sources
from helpers.paths import REPO

PACKAGE = REPO / "launcher"
SOURCES = {path.relative_to(REPO).as_posix(): sources.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def _is_str(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def event_dict_use(node: ast.AST) -> bool:
    """The event marker, or the string ``"event"`` in any form (``x["event"]``, ``x.get("event")``, ``{"event": ...}``,
    ``"event" in x``, a ``case {"event": ...}``...), or ``dict(event=...)``: an event handled as a dict.
    ``TFCLUSTER_EVENT_TOKEN`` is only the token variable's name, not the marker."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) \
            and (re.search(r"TFCLUSTER_EVENT(?!_)", node.value) or node.value == "event"):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
        and any(keyword.arg == "event" for keyword in node.keywords)


def _names(node: ast.AST | list[ast.AST]) -> set[str]:
    nodes = node if isinstance(node, list) else [node]
    return {n.id for top in nodes for n in ast.walk(top) if isinstance(n, ast.Name)} | {
        n.attr for top in nodes for n in ast.walk(top) if isinstance(n, ast.Attribute)}


def _picks_a_state(nodes: ast.AST | list[ast.AST]) -> bool:
    """``nodes`` name ``State.SUCCEEDED`` or ``State.FAILED`` (or their values, ``"succeeded"``, ``"failed"``)."""
    items = nodes if isinstance(nodes, list) else [nodes]
    values = {n.value for top in items for n in ast.walk(top) if isinstance(n, ast.Constant)}
    return bool({"SUCCEEDED", "FAILED"} & _names(items) or {"succeeded", "failed"} & values)


def _about_a_code(nodes: ast.AST | list[ast.AST | None]) -> bool:
    """``nodes`` read something named ``*code*`` (``exit_code``, ``returncode``...) or are an integer (a dict's key)."""
    items = [n for n in (nodes if isinstance(nodes, list) else [nodes]) if n is not None]
    ints = any(isinstance(n, ast.Constant) and type(n.value) is int for n in items)
    return ints or any("code" in name.lower() for name in _names(items))


def state_from_exit_code(node: ast.AST) -> bool:
    """A choice between ``State.SUCCEEDED`` and ``State.FAILED`` by an exit code, in any of the forms that choose:
    a conditional expression or an ``if`` statement testing a code, a ``match`` on one, a dict from codes to
    states, or a subscript by a code (``(FAILED, SUCCEEDED)[code == 0]``)."""
    if isinstance(node, (ast.IfExp, ast.If)):
        return _about_a_code(node.test) and _picks_a_state([*_as_list(node.body), *_as_list(node.orelse)])
    if isinstance(node, ast.Match):
        return _about_a_code(node.subject) and _picks_a_state(list(node.cases))
    if isinstance(node, ast.Dict):
        return _about_a_code(list(node.keys)) and _picks_a_state(list(node.values))
    if isinstance(node, ast.Subscript):
        return _about_a_code(node.slice) and _picks_a_state(node.value)
    return False


def _as_list(part: ast.AST | list[ast.stmt]) -> list[ast.AST]:
    return list(part) if isinstance(part, list) else [part]


def container_status_vocabulary(node: ast.AST) -> bool:
    return _is_str(node, "exited") or _is_str(node, "dead")


def entrypoint_test(node: ast.AST) -> bool:
    """``CONTAINER_ENTRYPOINT`` used (by name, as a module's attribute or imported under another name), or a
    target's ``entrypoint`` (called, or the method itself): the command of the built-in entrypoint."""
    if isinstance(node, ast.Name) and node.id == "CONTAINER_ENTRYPOINT":
        return True
    if isinstance(node, ast.alias) and node.name == "CONTAINER_ENTRYPOINT":
        return True
    return isinstance(node, ast.Attribute) and node.attr in ("CONTAINER_ENTRYPOINT", "entrypoint")


def offenders(check: Callable[[ast.AST], bool], homes: set[str], under: str = "launcher/") -> Iterator[str]:
    for path, tree in SOURCES.items():
        if path in homes or not path.startswith(under):
            continue
        for node in ast.walk(tree):
            if check(node):
                yield f"{path}:{getattr(node, 'lineno', '?')}"


@pytest.mark.parametrize("check, homes, under", [
    # progress.py: its ``{"event": ...}`` is the update of a JobProgress field, from typed events
    (event_dict_use, {"launcher/protocol/events.py", "launcher/protocol/job_progress.py"}, "launcher/"),
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
    (event_dict_use, 'kind = event.pop("event", None)'),
    (event_dict_use, 'payload = {"event": "step", "step": 3}'),
    (event_dict_use, 'payload = dict(event="step", step=3)'),
    (event_dict_use, 'is_event = "event" in payload'),
    (event_dict_use, 'match payload:\n    case {"event": "step"}:\n        pass'),
    (state_from_exit_code, "state = State.FAILED if code else State.SUCCEEDED"),
    (state_from_exit_code, "s = State.SUCCEEDED if exit_code == 0 else other"),
    (state_from_exit_code, "if process.returncode == 0:\n    state = State.SUCCEEDED\nelse:\n    state = State.FAILED"),
    (state_from_exit_code, "if not code:\n    return TaskStatus(name, State.SUCCEEDED)"),
    (state_from_exit_code, "state = {0: State.SUCCEEDED}.get(exit_code, State.FAILED)"),
    (state_from_exit_code, "STATES = {0: State.SUCCEEDED, 1: State.FAILED}"),
    (state_from_exit_code, 'state = State({0: "succeeded"}.get(code, "failed"))'),
    (state_from_exit_code, "state = (State.FAILED, State.SUCCEEDED)[code == 0]"),
    (state_from_exit_code, "match exit_code:\n    case 0:\n        state = State.SUCCEEDED\n    case _:\n        state = State.FAILED"),
    (container_status_vocabulary, 'ended = status in ("exited", "dead")'),
    (container_status_vocabulary, 'ended = {"exited": True, "dead": True}.get(status)'),
    (entrypoint_test, "runs = task.command == CONTAINER_ENTRYPOINT"),
    (entrypoint_test, "runs = task.command == targets.CONTAINER_ENTRYPOINT"),
    (entrypoint_test, "from launcher.plan.targets import CONTAINER_ENTRYPOINT as BUILT_IN"),
    (entrypoint_test, "runs = task.command[:3] == target.entrypoint()"),
    (entrypoint_test, "command_of = target.entrypoint"),
])
def test_each_check_finds_a_second_home(check: Callable[[ast.AST], bool], source: str) -> None:
    assert any(check(node) for node in ast.walk(sources.parse(source)))


@pytest.mark.parametrize("check, source", [
    (event_dict_use, 'log.info("an event was skipped")'),
    (state_from_exit_code, "state = State.SUCCEEDED if all(done) else State.FAILED"),  # from the tasks, not a code
    (state_from_exit_code, "if code is None:\n    return None"),
    (entrypoint_test, 'service["entrypoint"] = command'),  # Compose's own key
])
def test_the_checks_do_not_flag_what_is_no_second_home(check: Callable[[ast.AST], bool], source: str) -> None:
    assert not any(check(node) for node in ast.walk(sources.parse(source)))


def test_the_checks_see_the_source() -> None:
    """Guard against a vacuous pass: each home holds what its check looks for."""
    homes = {"launcher/protocol/events.py": event_dict_use, "launcher/supervision/status.py": state_from_exit_code,
             "launcher/backends/compose/runtime.py": container_status_vocabulary,
             "launcher/plan/planner.py": entrypoint_test}
    for path, check in homes.items():
        assert any(check(node) for node in ast.walk(SOURCES[path])), path
    assert Path(REPO / "launcher" / "plan" / "programs.py").is_file()
