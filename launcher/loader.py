"""Load a cluster spec from YAML, reporting every problem with its path and line.

Contract: ``load_spec`` returns a spec that passed field validation and the
topology rules, or raises ``SpecError`` carrying *all* problems found, each
with the YAML path and (where the parser knows it) the line number.
"""

from __future__ import annotations

import copy
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher import topology
from launcher.problems import Problem, SpecError, join_path
from launcher.spec import PATTERN_MEANINGS, ClusterSpec

LineMap = dict[tuple[str, ...], int]


def load_spec(path: str | Path) -> ClusterSpec:
    """Read and validate the spec file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem("", f"cannot read spec: {exc}")], str(path)) from None
    return parse_spec(text, source=str(path))


def parse_spec(text: str, source: str | None = None) -> ClusterSpec:
    """Validate spec YAML given as text; ``source`` names it in messages."""
    data, lines, problems = _parse_yaml(text)
    if problems:
        raise SpecError(problems, source)
    return validate_data(data, lines, source)


def validate_data(data: Any, lines: LineMap | None = None, source: str | None = None) -> ClusterSpec:
    """Validate an already-parsed mapping (e.g. built in a notebook)."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise SpecError([Problem("", f"the spec must be a mapping of fields, not {_kind(data)}", 1)], source)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_to_problem(err, lines) for err in exc.errors()]
        salvaged = _salvage(data, exc)
        if salvaged is not None:
            strategy_known = not any(p.path in ("strategy", "collective", "tpu") for p in problems)
            problems += [
                _with_line(p, lines)
                for p in topology.check(salvaged, strategy_known=strategy_known)
                if not _overlaps(p, problems)
            ]
        raise SpecError(problems, source) from None
    problems = topology.check(spec)
    if problems:
        raise SpecError([_with_line(p, lines) for p in problems], source)
    return spec


def _salvage(data: dict[str, Any], exc: ValidationError) -> ClusterSpec | None:
    """The spec with every invalid field dropped (so defaults apply), to check the topology too.

    Lets one run report both field errors and role/strategy errors. Returns
    None when dropping fields does not give a valid spec.
    """
    data = copy.deepcopy(data)
    for _ in range(3):
        for err in exc.errors():
            _drop(data, err["loc"])
        data.setdefault("name", "salvaged")
        data.setdefault("roles", {})
        try:
            return ClusterSpec.model_validate(data)
        except ValidationError as again:
            exc = again
    return None


def _drop(data: Any, loc: tuple[Any, ...]) -> None:
    """Remove the value at ``loc`` (or the deepest mapping key on the way that exists)."""
    parent = data
    for part in loc[:-1]:
        child = parent.get(part) if isinstance(parent, dict) else None
        if not isinstance(child, dict):
            break
        parent = child
    else:
        if isinstance(parent, dict):
            parent.pop(loc[-1], None)
        return
    if isinstance(parent, dict):
        parent.pop(part, None)


def _overlaps(problem: Problem, reported: list[Problem]) -> bool:
    """True if ``problem`` is about a field (or a parent/child of one) already reported."""
    return any(
        problem.path == r.path or problem.path.startswith(r.path + ".") or r.path.startswith(problem.path + ".")
        for r in reported
    )


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


def _parse_yaml(text: str) -> tuple[Any, LineMap, list[Problem]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, {}, [Problem("", f"not valid YAML: {reason}", line)]
    lines: LineMap = {}
    problems: list[Problem] = []
    if node is not None:
        _index_lines(node, (), lines, problems)
    return data, lines, problems


def _index_lines(node: yaml.Node, path: tuple[str, ...], lines: LineMap, problems: list[Problem]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            child = (*path, name)
            if name in seen:
                problems.append(Problem(join_path(child), "duplicate key", key.start_mark.line + 1))
            seen.add(name)
            lines[child] = key.start_mark.line + 1
            _index_lines(value, child, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*path, str(i)), lines, problems)


def _to_problem(err: dict[str, Any], lines: LineMap) -> Problem:
    loc = tuple(str(p) for p in err["loc"] if p != "[key]")  # pydantic marks dict-key errors with "[key]"
    message = err["msg"]
    kind = err["type"]
    if kind == "extra_forbidden":
        message = "unknown field" + _did_you_mean(loc)
    elif kind == "missing":
        message = "required field is missing"
    else:
        if kind == "string_pattern_mismatch":
            message = PATTERN_MEANINGS.get(err["ctx"]["pattern"], message)
        elif kind == "enum" and isinstance(err.get("input"), str):
            message += _closest(err["input"], re.findall(r"'([^']*)'", err["ctx"]["expected"]))
        message = message.removeprefix("Value error, ")
        if isinstance(err.get("input"), (str, int, float, bool)) and kind != "value_error":
            message += f" (got {err['input']!r})"
    return _with_line(Problem(join_path(loc), message), lines)


def _with_line(problem: Problem, lines: LineMap) -> Problem:
    path = tuple(problem.path.split(".")) if problem.path else ()
    while path and path not in lines:
        path = path[:-1]
    return Problem(problem.path, problem.message, lines.get(path))


def _did_you_mean(loc: tuple[str, ...]) -> str:
    model = _model_at(ClusterSpec, loc[:-1])
    if model is None:
        return ""
    known = list(model.model_fields)
    return f"{_closest(loc[-1], known)} (allowed: {', '.join(known)})"


def _closest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_at(model: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The model class found at ``loc`` below ``model`` (through Optional, list and dict)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = current.model_fields[part].annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if a is not type(None)]
        return models[0] if len(models) == 1 else annotation
    return annotation
