"""The supervision loop stays small (issue 45): ``Supervisor`` composes collaborators, each with one job and tests
of its own, and is held to a size where a reader takes it in at once."""

from __future__ import annotations

import ast

from helpers import sources
from helpers.paths import REPO

#: The most lines the ``Supervisor`` class may have, and the most parameters its constructor may take.
MAX_LINES, MAX_PARAMETERS = 250, 7


def test_the_supervisor_is_a_small_loop_with_few_constructor_parameters() -> None:
    path = REPO / "launcher" / "supervision" / "supervisor.py"
    tree = sources.parse(path.read_text(), str(path))
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Supervisor"]
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 <= MAX_LINES
    [init] = [node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"]
    arguments = init.args
    parameters = [*arguments.posonlyargs, *arguments.args[1:], *arguments.kwonlyargs]  # not self
    assert len(parameters) <= MAX_PARAMETERS, [a.arg for a in parameters]
