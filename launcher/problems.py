"""Spec problems: one line each, naming the field, gathered before anything starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec. ``path`` is the dotted YAML path (``roles.ps.replicas``)."""

    path: str
    message: str
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        where = ":".join(str(p) for p in (source, self.line) if p is not None)
        field = self.path or "(spec)"
        return f"{where + ': ' if where else ''}{field}: {self.message}"


class SpecError(Exception):
    """Raised with every problem found in a spec; ``str()`` is one line per problem."""

    def __init__(self, problems: list[Problem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(p.render(source) for p in self.problems))
