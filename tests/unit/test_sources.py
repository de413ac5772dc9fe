"""The tests' one way to parse source (``helpers.sources.parse``): CPython 3.11's spurious "AST constructor
recursion depth mismatch" (python/cpython#106905) is parsed once more, any other error is not; and no test calls
``ast.parse`` itself."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import sources
from helpers.paths import REPO

MISMATCH = SystemError("AST constructor recursion depth mismatch (before=12, after=13)")
SOURCE = "y = 2\n"


def failing(errors: list[Exception], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Make ``ast.parse``, as the helper sees it, raise ``errors`` in turn on ``SOURCE``, then parse it; return its
    calls on ``SOURCE``. Any other source (pytest's own, formatting a failure) is parsed as ever."""
    calls: list[tuple[str, str]] = []
    real: Callable[..., ast.Module] = ast.parse

    def parse(source: str, filename: str = "<unknown>", *args: object, **kwargs: object) -> ast.Module:
        if source == SOURCE:
            calls.append((source, filename))
            if len(calls) <= len(errors):
                raise errors[len(calls) - 1]
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(sources.ast, "parse", parse)
    return calls


def test_a_parse_is_the_source_as_ast_parse_reads_it() -> None:
    tree = sources.parse("x = 1\n", "here.py")
    assert isinstance(tree, ast.Module) and ast.unparse(tree) == "x = 1"
    with pytest.raises(SyntaxError) as raised:
        sources.parse("x = (\n", "here.py")
    assert raised.value.filename == "here.py"


def test_the_recursion_depth_mismatch_is_parsed_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = failing([MISMATCH], monkeypatch)
    assert ast.unparse(sources.parse(SOURCE, "there.py")) == "y = 2"
    assert calls == [(SOURCE, "there.py")] * 2


def test_a_second_mismatch_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once more, not in a loop."""
    calls = failing([MISMATCH, MISMATCH], monkeypatch)
    with pytest.raises(SystemError) as raised:
        sources.parse(SOURCE)
    assert raised.value is MISMATCH and len(calls) == 2


@pytest.mark.parametrize("error", [SyntaxError("invalid syntax"), SystemError("some other internal error"), ValueError("null bytes")],
                         ids=["syntax", "other-system-error", "value"])
def test_any_other_error_is_not_retried(error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = failing([error], monkeypatch)
    with pytest.raises(type(error)) as raised:
        sources.parse(SOURCE)
    assert raised.value is error and len(calls) == 1


def direct_parses(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that call or import ``ast.parse`` itself."""
    return sorted(node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "parse" and isinstance(node.value, ast.Name) and node.value.id == "ast"
            or isinstance(node, ast.ImportFrom) and node.module == "ast" and any(a.name == "parse" for a in node.names))


def test_the_check_sees_each_form() -> None:
    assert direct_parses(sources.parse("import ast\nast.parse(s)\nf = ast.parse\nfrom ast import parse\n")) == [2, 3, 4]
    assert direct_parses(sources.parse("from helpers import sources\nsources.parse(s)\nyaml.parse(s)\n")) == []


def test_no_test_parses_source_but_through_the_helper() -> None:
    # the helper itself, and this file, which stands in for the ast.parse the helper calls
    exempt = {REPO / "tests" / "helpers" / "sources.py", Path(__file__).resolve()}
    offenders = {path.relative_to(REPO).as_posix(): lines for path in sorted((REPO / "tests").rglob("*.py"))
                 if path not in exempt and (lines := direct_parses(sources.parse(path.read_text(), str(path))))}
    assert offenders == {}
