"""Every test README.md and docs/*.md name exists: each test file, and each test function in it.

A doc names a test as ``tests/<dir>/test_x.py`` (that path), ``test_x.py`` (a file of that name somewhere under
``tests/``), either followed by ``::test_name`` (a function or method in that file; a parametrized id ``[...]`` is
stripped), or ``::test_name`` alone, which continues the file named last before it on the page. ``*`` is a glob
(``test_k8s_*.py``, ``test_adoption_*``): it must match at least one.
"""

from __future__ import annotations

import ast
import functools
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from helpers import sources

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: A test file (with its directory or not), optionally ``::`` a test; or ``::`` a test of the file named before it.
NAMED = re.compile(r"(?P<file>(?:tests/[\w/*]+/)?test_[\w*]+\.py)?::(?P<test>test_[\w*]+)|(?P<alone>(?:tests/[\w/*]+/)?test_[\w*]+\.py)")


@functools.cache
def _files() -> tuple[Path, ...]:
    return tuple(sorted(TESTS.rglob("test_*.py")))


@functools.cache
def _functions(path: Path) -> frozenset[str]:
    tree = sources.parse(path.read_text(), str(path))
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _matching(named: str) -> list[Path]:
    """The test files ``named`` means: that path under the repository, or every file of that name under tests/."""
    if "/" in named:
        return [path for path in _files() if fnmatch(str(path.relative_to(REPO)), named)]
    return [path for path in _files() if fnmatch(path.name, named)]


def missing_tests(text: str) -> list[str]:
    """Each test ``text`` names that does not exist, with why."""
    problems: list[str] = []
    last = ""
    for match in NAMED.finditer(text):
        named = match["file"] or match["alone"] or last
        if not named:
            problems.append(f"::{match['test']}: no file named before it")
            continue
        last = named
        files = _matching(named)
        if not files:
            problems.append(f"{named}{'::' + match['test'] if match['test'] else ''}: no such test file")
        elif match["test"] and not any(fnmatch(name, match["test"]) for path in files for name in _functions(path)):
            problems.append(f"{named}::{match['test']}: no such test in {', '.join(str(p.relative_to(REPO)) for p in files)}")
    return problems


def test_a_named_test_that_does_not_exist_is_found() -> None:
    existing = "tests/unit/test_doc_tests.py::test_a_named_test_that_does_not_exist_is_found"
    assert missing_tests(f"`{existing}`, `::test_every_test_the_docs_name_exists`, `test_doc_links.py`") == []
    assert missing_tests("`test_doc_tests.py::test_gone`, `::test_gone_too`, `tests/unit/test_gone.py`, `::test_x`") == [
        "test_doc_tests.py::test_gone: no such test in tests/unit/test_doc_tests.py",
        "test_doc_tests.py::test_gone_too: no such test in tests/unit/test_doc_tests.py",
        "tests/unit/test_gone.py: no such test file",
        "tests/unit/test_gone.py::test_x: no such test file",
    ]
    assert missing_tests("`test_layers.py::test_*`, `tests/unit/test_doc_*.py`, `test_doc_tests.py::test_nothing_*`") == [
        "test_doc_tests.py::test_nothing_*: no such test in tests/unit/test_doc_tests.py"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_test_the_docs_name_exists(page: Path) -> None:
    assert missing_tests(page.read_text()) == [], f"{page.relative_to(REPO)} names tests that do not exist"
