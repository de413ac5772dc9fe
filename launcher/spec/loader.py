"""Load a cluster spec from YAML, reporting every problem with its path and line.

Contract: ``load_spec`` returns a spec that passed field validation, the
spec's own cross-field checks (``launcher.spec.cross_checks``) and every ``SpecCheck`` in
``checks`` (rules owned by higher layers: derived names, a backend's
limits; run once the roles fit the strategy, ``cross_checks.plannable``), or raises ``SpecError`` carrying *all* problems found, each with
the YAML path and (where the parser knows it) the line number.

Bounded input: a file over ``MAX_SPEC_BYTES``, YAML whose aliases would
expand to more than ``MAX_NODES`` nodes, nesting deeper than ``MAX_DEPTH``
once its aliases are expanded, or an alias inside its own anchor is refused
with one problem, before anything is expanded, in memory proportional to
the text. So is every scalar whose text YAML cannot turn into the value its tag
names, before any is turned (``_scalar_problem``): an integer beyond 64 bits
(Python refuses to read one of over 4,300 digits, and a sexagesimal one takes
time quadratic in its text), a number that is not finite (``.inf``,
``.nan``, ``1.0e+999``), or an explicitly tagged one that does not parse
(``!!int abc``, ``!!bool maybe``); each names its field and line.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import types
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from launcher.spec import cross_checks, tfjob
from launcher.spec import tfjob_vocabulary as vocabulary
from launcher.spec.cautions import cautions
from launcher.spec.models import PATTERN_MEANINGS, ClusterSpec
from launcher.spec.problems import Problem, SpecCheck, SpecError, SpecWarning, join_path, kind_of, split_path

LineMap = dict[tuple[str, ...], int]

#: A spec is a page of YAML; anything larger is not one.
MAX_SPEC_BYTES = 1024 * 1024
#: YAML nodes after expanding aliases (a 10,000-worker spec has a few hundred).
MAX_NODES = 100_000
MAX_DEPTH = 64
#: The integers a spec may hold: Kubernetes' int64 (no field, nor anything a TFJob carries, takes a larger one).
INT_RANGE = range(-(2**63), 2**63)
#: The longest text of an integer in INT_RANGE, in any base YAML reads (``0b`` and 64 binary digits), underscores aside.
MAX_INT_TEXT = 67
INT_TAG, FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
#: The scalar tags YAML makes a value of by parsing the text: what that value is, for messages.
PARSED_SCALARS = {INT_TAG: "an integer", FLOAT_TAG: "a number", "tag:yaml.org,2002:bool": "a boolean",
                  "tag:yaml.org,2002:timestamp": "a date", "tag:yaml.org,2002:binary": "base64 data"}


def load_spec(
    path: str | Path, checks: Sequence[SpecCheck] = (), overrides: Mapping[str, Any] | None = None, *, kubernetes: bool = True
) -> ClusterSpec:
    """Read and validate the spec (or TFJob, see ``parse_spec``) file at ``path``, ``overrides`` merged in."""
    return parse_spec(_read(Path(path)), source=str(path), checks=checks, overrides=overrides, kubernetes=kubernetes)


def warn_at(path: str | Path, notes: Sequence[Problem]) -> None:
    """Each of ``notes`` (a spec field's path and what it means) as one ``SpecWarning``, located in the spec file
    at ``path``."""
    if not notes:
        return
    _, lines, _ = _parse_yaml(_read(Path(path)))
    for note in notes:
        warnings.warn(SpecWarning(_with_line(note, lines).render(str(path))), stacklevel=2)


def load_tfjob(path: str | Path) -> tfjob.Converted:
    """Read the TFJob manifest at ``path`` and convert it (``launcher.spec.tfjob``), without validating the result;
    a malformed one (``Converted.malformed``) is refused."""
    data, lines, problems = _parse_yaml(_read(Path(path)))
    if not problems and not tfjob.is_tfjob(data):
        problems = [Problem("apiVersion", f"not a TFJob: expected apiVersion {vocabulary.API_VERSION} and kind {vocabulary.KIND}", 1)]
    if problems:
        raise SpecError(problems, str(path))
    converted = tfjob.convert(data)
    if converted.malformed:
        raise SpecError([_with_line(p, lines) for p in converted.malformed], str(path))
    return converted


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
        if len(raw) > MAX_SPEC_BYTES:
            raise SpecError([Problem("", f"the file is over {MAX_SPEC_BYTES // 1024} KiB: not a cluster spec")], str(path))
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem("", f"cannot read spec: {exc}")], str(path)) from None


def parse_spec(
    text: str,
    source: str | None = None,
    checks: Sequence[SpecCheck] = (),
    overrides: Mapping[str, Any] | None = None,
    *,
    kubernetes: bool = True,
) -> ClusterSpec:
    """Validate spec YAML given as text; ``source`` names it in messages. ``overrides`` (nested mappings,
    e.g. ``{"kubernetes": {"registry": "..."}}``: command-line options) replace its values before validation.

    A Kubeflow TFJob is converted first (``launcher.spec.tfjob``): its fields
    tfcluster does not carry are refused, and so are its Kubernetes-only pod
    fields unless ``kubernetes``; what it carries is validated all the same, and
    every problem of both (one line each) names the TFJob's own field.
    What is carried with a difference (the conversion's notes), and what a
    valid spec lets its tasks reach beyond their run (``launcher.spec.cautions``),
    is one ``SpecWarning`` each, once the spec is valid.
    """
    data, lines, problems = _parse_yaml(text)
    if problems:
        raise SpecError(problems, source)
    if tfjob.is_tfjob(data):
        return _validate_tfjob(data, lines, source, checks, kubernetes, overrides)
    if overrides and isinstance(data, dict):
        data = _merged(data, overrides)
    spec = validate_data(data, lines, source, checks)
    _warn(cautions(spec), lines, source)
    return spec


def _merged(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(data)
    for key, value in overrides.items():
        below = merged.get(key)
        merged[key] = _merged(below, value) if isinstance(value, Mapping) and isinstance(below, dict) else value
    return merged


def _validate_tfjob(
    data: dict[str, Any], lines: LineMap, source: str | None, checks: Sequence[SpecCheck], kubernetes: bool,
    overrides: Mapping[str, Any] | None,
) -> ClusterSpec:
    converted = tfjob.convert(data)
    refused = [_with_line(p, lines) for p in
               converted.malformed + converted.dropped + ([] if kubernetes else converted.kubernetes_only)]
    try:
        spec = validate_data(_merged(converted.data, overrides or {}), converted.lines(lines), source, checks)
    except SpecError as exc:  # what was carried has problems too: every one is reported, each at its TFJob field
        found = [Problem(converted.origin(p.path), p.message, p.line) for p in exc.problems]
        raise SpecError(refused + [p for p in found if not _overlaps(p, refused)], source) from None
    if refused:
        raise SpecError(refused, source)
    spec_cautions = [Problem(converted.origin(p.path), p.message) for p in cautions(spec)]
    _warn(converted.notes + ([] if kubernetes else converted.kubernetes_inert) + spec_cautions, lines, source)
    return spec


def _warn(notes: Sequence[Problem], lines: LineMap, source: str | None) -> None:
    """Each of ``notes`` as one ``SpecWarning`` line, located by ``lines``."""
    for note in notes:
        warnings.warn(SpecWarning(_with_line(note, lines).render(source)), stacklevel=3)


def validate_data(
    data: Any, lines: LineMap | None = None, source: str | None = None, checks: Sequence[SpecCheck] = ()
) -> ClusterSpec:
    """Validate an already-parsed mapping (e.g. built in a notebook) against the spec and ``checks``."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise SpecError([Problem("", f"the spec must be a mapping of fields, not {kind_of(data)}", 1)], source)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_to_problem(err, lines) for err in exc.errors()]
        salvaged = _salvage(data, exc)
        if salvaged is not None:
            strategy_known = not any(p.path in ("strategy", "collective", "tpu") for p in problems)
            found = _checked(salvaged, checks, strategy_known=strategy_known)
            problems += [_with_line(p, lines) for p in found if not _overlaps(p, problems)]
        raise SpecError(problems, source) from None
    problems = _checked(spec, checks)
    if problems:
        raise SpecError([_with_line(p, lines) for p in problems], source)
    return spec


def _checked(spec: ClusterSpec, checks: Sequence[SpecCheck], *, strategy_known: bool = True) -> list[Problem]:
    """The spec's own cross-field checks, and the ``checks`` of the layers above for a spec they can plan (``cross_checks.plannable``:
    a spec without a task to train, say, is not theirs to judge)."""
    found = cross_checks.check(spec, strategy_known=strategy_known)
    if not cross_checks.plannable(spec):
        return found
    return found + [problem for check in checks for problem in check(spec)]


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
    """Remove the value at ``loc`` (or the deepest mapping key on the way that exists); an empty ``loc`` (the
    document itself, e.g. a key that is no Unicode text) removes nothing."""
    if not loc:
        return
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


def _parse_yaml(text: str) -> tuple[Any, LineMap, list[Problem]]:
    if len(text.encode()) > MAX_SPEC_BYTES:
        return None, {}, [Problem("", f"the text is over {MAX_SPEC_BYTES // 1024} KiB: not a cluster spec")]
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        return None, {}, [_yaml_problem(exc)]
    try:
        node = loader.get_single_node()
        bound = _beyond_bounds(node)
        if bound:
            return None, {}, [Problem("", bound, node.start_mark.line + 1 if node is not None else None)]
        lines: LineMap = {}
        problems: list[Problem] = []
        if node is not None:
            _index_lines(loader, node, (), lines, problems)
        if problems:  # duplicate keys, unreadable scalars: nothing is constructed
            return None, lines, problems
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        return None, {}, [_yaml_problem(exc)]
    except RecursionError:
        return None, {}, [Problem("", f"not valid YAML: nested deeper than {MAX_DEPTH} levels")]
    finally:
        loader.dispose()
    return data, lines, problems


def _yaml_problem(exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return Problem("", f"not valid YAML: {reason}", line)


def _beyond_bounds(root: yaml.Node | None) -> str | None:
    """Why ``root`` is too large, too deep or recursive once its aliases are expanded, or None.

    Walks the node graph (aliases are shared nodes) once, without recursion,
    memoizing each node's expanded size and height, so a billion-laughs
    document costs its text, not its expansion, and nesting built from
    aliases counts as deep as it expands (an alias to a deep node, placed
    deep, is as deep as the sum).
    """
    if root is None:
        return None
    done: dict[int, tuple[int, int]] = {}  # id -> (expanded size, expanded height)
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in done:
            continue
        children = _children(node)
        if not expanded:
            if key in open_:
                return "YAML aliases refer to themselves: not a cluster spec"
            if len(open_) >= MAX_DEPTH:
                return f"not valid YAML for a spec: nested deeper than {MAX_DEPTH} levels"
            open_.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in done)
            continue
        open_.discard(key)
        size = 1 + sum(done[id(child)][0] for child in children)
        height = 1 + max((done[id(child)][1] for child in children), default=0)
        if size > MAX_NODES:
            return f"YAML aliases expand to over {MAX_NODES} values: not a cluster spec"
        if height > MAX_DEPTH:
            return f"not valid YAML for a spec: nested deeper than {MAX_DEPTH} levels"
        done[key] = (size, height)
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _index_lines(loader: yaml.SafeLoader, node: yaml.Node, path: tuple[str, ...], lines: LineMap,
                 problems: list[Problem]) -> None:
    """Each path's line into ``lines``; a duplicate key, and a scalar (value or key) ``_scalar_problem`` refuses,
    into ``problems``. Runs before anything is constructed, on a node graph ``_beyond_bounds`` passed."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode):
        why = _scalar_problem(loader, node)
        if why is not None:
            problems.append(Problem(join_path(path), why, node.start_mark.line + 1))
    elif isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            child = (*path, name)
            why = _scalar_problem(loader, key) if isinstance(key, yaml.ScalarNode) else None
            if why is not None:
                problems.append(Problem(join_path(path), f"a key: {why}", key.start_mark.line + 1))
                continue
            if name in seen:
                problems.append(Problem(join_path(child), "duplicate key", key.start_mark.line + 1))
            seen.add(name)
            lines[child] = key.start_mark.line + 1
            _index_lines(loader, value, child, lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(loader, item, (*path, str(i)), lines, problems)


def _scalar_problem(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str | None:
    """Why the value YAML would make of ``node`` (by its tag, implicit or explicit) is no spec value, or None.

    An integer's text is measured before it is read: one beyond ``INT_RANGE`` is refused, in time linear in its
    text, whatever its base (``0x``, ``0b``, ``0o``, sexagesimal ``1:30``)."""
    kind = PARSED_SCALARS.get(node.tag)
    if kind is None:
        return None
    text = node.value
    if node.tag == INT_TAG and len(text.replace("_", "").lstrip("+-")) > MAX_INT_TEXT:
        return f"{_excerpt(text)} is an integer beyond 64 bits: no field takes one"
    try:
        value = loader.yaml_constructors[node.tag](loader, node)
    except (ValueError, ArithmeticError, LookupError, AttributeError, TypeError, yaml.YAMLError):
        return f"{_excerpt(text)} is not {kind}, as its tag says"
    if node.tag == INT_TAG and value not in INT_RANGE:
        return f"{_excerpt(text)} is an integer beyond 64 bits: no field takes one"
    if node.tag == FLOAT_TAG and not math.isfinite(value):
        return f"{_excerpt(text)} is not a finite number: no field takes an infinity or NaN"
    return None


def _excerpt(text: str, keep: int = 24) -> str:
    """``text`` quoted, its middle left out past ``keep`` characters (a value of 5,000 digits in a message)."""
    if len(text) <= keep:
        return repr(text)
    return repr(f"{text[:keep // 2]}...{text[-keep // 2:]}") + f" ({len(text)} characters)"


def _to_problem(err: ErrorDetails, lines: LineMap) -> Problem:
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
        if isinstance(err.get("input"), str) and kind != "value_error":
            message += f" (got {_excerpt(err['input'], 80)})"
        elif isinstance(err.get("input"), (int, float, bool)) and kind != "value_error":
            got = err["input"]  # an int beyond 64 bits comes only from Python (validate_data): its digits may be too many to show
            message += f" (got {got!r})" if not isinstance(got, int) or got in INT_RANGE else \
                f" (got an integer of {got.bit_length()} bits)"
    return _with_line(Problem(join_path(loc), message), lines)


def _with_line(problem: Problem, lines: LineMap) -> Problem:
    path = split_path(problem.path)
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
