"""Spec problems: one line each, naming the field, gathered before anything starts.

Contract: a ``Problem`` names a dotted YAML path (and, once located by the
loader, a line); a ``SpecCheck`` is any rule over a field-valid spec that
returns problems (the spec's own rules, the planner's, each backend's); a
``SpecError`` carries every problem found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.errors import TfclusterError

if TYPE_CHECKING:
    from launcher.spec.models import ClusterSpec

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: Characters that could end a line or drive a terminal (C0, DEL, C1, Unicode line breaks), and those no UTF-8
#: text or YAML stream carries (lone surrogates, as an undecodable file name holds; U+FFFE, U+FFFF), as escapes.
_CONTROL = {code: ascii(chr(code))[1:-1] for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029,
                                                      *range(0xD800, 0xE000), 0xFFFE, 0xFFFF)}
#: The same, but a text's own line breaks (``\n``) and tabs: for text that is several lines by design.
_CONTROL_IN_LINES = {code: escape for code, escape in _CONTROL.items() if chr(code) not in "\n\t"}
#: Either set as a pattern (dry-run's text runs to gigabytes: a text without any is returned as it is).
_FOUND = {table is _CONTROL: re.compile("[" + "".join(map(re.escape, map(chr, table))) + "]")
          for table in (_CONTROL, _CONTROL_IN_LINES)}
_PATH_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[^.]+')


def join_path(parts: Iterable[object]) -> str:
    """Dotted YAML path; keys that are not plain words are quoted (``env."my key"``)."""
    return ".".join(p if _PLAIN_KEY.fullmatch(p) else json.dumps(p) for p in map(str, parts))


def split_path(path: str) -> tuple[str, ...]:
    """The keys of a ``join_path`` path, quoted ones unquoted (``kubernetes.labels."a.io/b"`` has three)."""
    return tuple(json.loads(part) if part.startswith('"') else part for part in _PATH_PART.findall(path))


def escaped(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character escaped into its visible form (``\\n``, ``\\x1b``, ``\\x07``,
    ``\\x9b``, ``\\u2028``, ...): it can neither start a line of its own nor drive the terminal (colours, the
    title, the clipboard). ``lines``: its own line breaks (``\\n``) and tabs are kept, for text that is several
    lines by design (a stack dump, one problem per line); a ``\\r`` is escaped still. The one escaper of
    everything tfcluster shows: problem lines here, every other output through ``launcher.cli.terminal``."""
    if text.isprintable():  # the common case (no control character, nor any other unprintable one): one scan
        return text
    table = _CONTROL_IN_LINES if lines else _CONTROL
    return _FOUND[not lines].sub(lambda found: table[ord(found[0])], text)


def one_line(text: str) -> str:
    """``escaped(text)``: a value quoted in a message stays on its line. Every problem line passes here, and
    every comment ``convert`` writes (``tfjob.to_yaml``)."""
    return escaped(text)


def kind_of(value: object) -> str:
    """What a parsed YAML value is, for messages: ``nothing`` (null), ``a mapping``, ``a list``, ``a string``,
    ``a number``, ``a boolean``."""
    kinds = {type(None): "nothing", dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number"}
    return kinds.get(type(value), f"a {type(value).__name__}")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec. ``path`` is the dotted YAML path (``roles.ps.replicas``)."""

    path: str
    message: str
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        where = ":".join(str(p) for p in (source, self.line) if p is not None)
        field = self.path or "(spec)"
        return one_line(f"{where + ': ' if where else ''}{field}: {self.message}")


#: A rule over a field-valid spec: every problem it finds (empty = none).
SpecCheck = Callable[["ClusterSpec"], list[Problem]]


class SpecWarning(UserWarning):
    """A problem line that is not a refusal: something carried with a difference that changes neither what the
    job computes, nor where it runs, nor what it can reach (a TFJob field tfcluster honours its own way), or what
    a spec asks its tasks to reach beyond their run (``launcher.spec.cautions``: a hostPath volume)."""


class SpecError(TfclusterError):
    """Raised with every problem found in a spec; ``str()`` is one line per problem."""

    def __init__(self, problems: list[Problem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(p.render(source) for p in self.problems))
