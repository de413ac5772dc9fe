"""``.dockerignore`` with Docker's own semantics, in bounded time.

Contract: ``read_rules(path)`` reads a ``.dockerignore`` as Docker's CLI does and raises
``SpecError`` (one line per problem, naming file and line) for non-UTF-8 text or a pattern Docker
refuses. ``Rules`` matches relative slash-separated paths as moby's ``patternmatcher`` does
(the last matching pattern on the path or a parent decides; ``!`` keeps), compiled to RE2, so
matching time is linear in the path. On purpose, ``**`` also spans names holding a newline.
Why not the Docker SDK's matcher: docs/architecture.md (Decisions).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import re2

from launcher.spec.problems import Problem, SpecError

#: Characters moby escapes in a pattern's regular expression (no meaning in ``filepath.Match``, one in a regexp).
_REGEX_ONLY = frozenset(".+()|{}$")
_WILDCARDS = re.compile(r"[*?\[\\]")
_UTF8_BOM = b"\xef\xbb\xbf"


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # an error is ours to report, in one line
    options.dot_nl = True  # ** spans a name with a newline too (Go's does not: Docker ships new\nline/.env)
    return options


_OPTIONS = _re2_options()


@dataclass(frozen=True)
class Rule:
    """One pattern: ``text`` as cleaned, whether it is an exception (``!``), where it comes from (for messages)."""

    text: str
    exception: bool
    origin: str
    match: Callable[[str], bool] = field(compare=False, repr=False)

    def may_match_below(self, directory: str) -> bool:
        """Whether this pattern could match a path under ``directory`` (a cheap, conservative test)."""
        literal = self.text[:m.start()] if (m := _WILDCARDS.search(self.text)) else self.text
        below = directory + "/"
        return literal.startswith(below) or below.startswith(literal)


def compile_pattern(pattern: str) -> Callable[[str], bool]:
    """The predicate of one cleaned pattern, exactly as moby's ``Pattern.compile``/``match`` build it.

    Raises ``ValueError`` for a pattern Docker refuses (an unclosed class, a trailing ``\\``, ...).
    """
    regex, kind = "^", "exact"
    i, count = 0, 0
    while i < len(pattern):
        char, first = pattern[i], count == 0
        i, count = i + 1, count + 1
        if char == "*" and pattern[i:i + 1] == "*":  # some flavour of **
            i += 1
            if pattern[i:i + 1] == "/":
                i += 1
            if i >= len(pattern):  # ** at the end: everything
                kind, regex = ("prefix", regex) if kind == "exact" else ("regexp", regex + ".*")
            else:
                kind, regex = "regexp", regex + "(.*/)?"
            if first:
                kind = "suffix"
        elif char == "*":
            kind, regex = "regexp", regex + "[^/]*"
        elif char == "?":
            kind, regex = "regexp", regex + "[^/]"
        elif char in _REGEX_ONLY:
            regex += "\\" + char
        elif char == "\\":
            if i >= len(pattern):
                raise ValueError("a trailing \\ escapes nothing")
            kind, regex, i = "regexp", regex + "\\" + pattern[i], i + 1
        elif char in "[]":
            kind, regex = "regexp", regex + char
        else:
            regex += char
    try:
        compiled = re2.compile(regex + "$", _OPTIONS)  # compiled for every kind: Docker refuses a bad pattern anyway
    except re2.error as exc:
        message = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(message) from None
    if kind == "exact":
        return lambda path: path == pattern
    if kind == "prefix":
        return lambda path: path.startswith(pattern[:-2])
    if kind == "suffix":
        suffix = pattern[2:]
        return lambda path: path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
    return lambda path: compiled.search(path) is not None


def clean(pattern: str) -> str:
    """A pattern as Docker keeps it: Go's ``filepath.Clean``, then relative to the context."""
    cleaned = posixpath.normpath(pattern)
    if cleaned.startswith("//"):  # POSIX keeps a leading //, Go does not
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned[1:] if len(cleaned) > 1 and cleaned.startswith("/") else cleaned


def make_rule(line: str, origin: str) -> Rule:
    """The rule of one ``.dockerignore`` line (not blank, not a comment); ``ValueError`` if Docker refuses it."""
    exception = line.startswith("!")
    body = line[1:].strip() if exception else line
    if not body:
        raise ValueError('"!" excepts nothing')
    text = clean(body)
    return Rule(text, exception, origin, compile_pattern(text))


def read_rules(path: Path, display: str) -> list[Rule]:
    """The rules of the ``.dockerignore`` at ``path`` (``display`` names it in messages); none if it is missing."""
    if not path.exists() and not path.is_symlink():
        return []
    if not path.is_file():  # a FIFO would block the read forever
        raise SpecError([Problem("(workspace)", "not a regular file")], display)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError([Problem("(workspace)", f"cannot read it: {exc.strerror}")], display) from None
    data = data.removeprefix(_UTF8_BOM)
    rules, problems = [], []
    for number, raw in enumerate(data.split(b"\n"), start=1):  # as Go's bufio.ScanLines: \n ends a line, \r\n too
        try:
            line = raw.removesuffix(b"\r").decode()
        except UnicodeDecodeError:
            problems.append(Problem("(workspace)", "not UTF-8 (Docker reads .dockerignore as UTF-8)", number))
            continue
        if line.startswith("#") or not line.strip():
            continue
        try:
            rules.append(make_rule(line.strip(), f"{display}:{number}"))
        except ValueError as exc:
            problems.append(Problem("(workspace)", f"pattern {line.strip()!r}: {exc}", number))
    if problems:
        raise SpecError(problems, display)
    return rules


class Rules:
    """Ordered rules; a path is matched with its parent directory's per-rule results (moby's
    ``MatchesOrParentMatches``: a rule matching a directory matches everything under it)."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = tuple(rules)

    def matches(self, relative: str, parent: tuple[bool, ...] | None) -> tuple[bool, ...]:
        """Per rule, whether it matches ``relative`` or a parent (``parent``: the parent directory's result)."""
        key = decoded(relative, "replace")
        if parent is None:
            return tuple(rule.match(key) for rule in self.rules)
        return tuple(above or rule.match(key) for above, rule in zip(parent, self.rules, strict=True))

    def decider(self, matches: tuple[bool, ...]) -> Rule | None:
        """The rule that decides (the last one matching), None when none does: the path is kept."""
        return next((self.rules[i] for i in reversed(range(len(matches))) if matches[i]), None)

    def may_keep_below(self, directory: str) -> bool:
        """Whether an exception could keep something under ``directory`` (else an excluded directory is skipped)."""
        return any(rule.exception and rule.may_match_below(directory) for rule in self.rules)


def decoded(relative: str, errors: str) -> str:
    """``relative`` with the bytes of a name that is not UTF-8 (which Python keeps as lone surrogates) decoded
    with ``errors``: ``replace``, as Go's regexp sees them (each a U+FFFD); ``backslashreplace``, shown (``\\xff``)."""
    try:
        relative.encode()
    except UnicodeEncodeError:
        return relative.encode(errors="surrogateescape").decode(errors=errors)
    return relative
