"""A name or key matches its pattern whole: a trailing newline is not part of a valid one.

Two engines check the spec's patterns. ``Field(pattern=...)`` is matched by
pydantic's Rust regex engine, where ``$`` is the end of the text; Python's
``re`` lets ``$`` match before a final newline, so the compiled patterns
(environment names, label keys, quantities, ``run``'s options) are used with
``fullmatch``. Both are checked here by test, each pattern of the spec's
schema and each compiled one through the field that uses it, and through the
TFJob reader, whose env names and labels become the spec's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from helpers.paths import REPO
from launcher import api
from launcher.plan.script import ScriptRun, script_problems
from launcher.spec.models import ABSOLUTE_PATH, ClusterSpec
from launcher.spec.problems import SpecError
from launcher.spec.quantities import byte_count

#: Patterns that constrain only how a value starts (a mount path, a sub path): a newline after is theirs to allow.
PREFIX_PATTERNS = {ABSOLUTE_PATH, r"^[^/]"}


def schema_patterns() -> list[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(ClusterSpec.model_json_schema())
    return sorted(found)


def test_the_schema_has_the_patterns_this_file_knows() -> None:
    assert PREFIX_PATTERNS <= set(schema_patterns()) and len(schema_patterns()) > len(PREFIX_PATTERNS)


@pytest.mark.parametrize("pattern", [p for p in schema_patterns() if p not in PREFIX_PATTERNS])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_field_pattern_refuses_a_match_with_a_newline_after_it(pattern: str, data: st.DataObject) -> None:
    field = TypeAdapter(Annotated[str, Field(pattern=pattern)])
    value = data.draw(st.from_regex(pattern, fullmatch=True))
    assert field.validate_python(value) == value
    for tail in ("\n", "\r\n", "\x00"):
        with pytest.raises(ValidationError):
            field.validate_python(value + tail)


BASE: dict[str, Any] = {"name": "job", "roles": {"worker": {"replicas": 2}}}


@pytest.mark.parametrize(("change", "field"), [
    (lambda tail: {"env": {f"A{tail}": "x"}}, 'env."A\\n"'),
    (lambda tail: {"roles": {"worker": {"replicas": 2, "env": {f"B{tail}": "x"}}}}, 'roles.worker.env."B\\n"'),
    (lambda tail: {"kubernetes": {"labels": {f"team{tail}": "x"}}}, 'kubernetes.labels."team\\n"'),
    (lambda tail: {"kubernetes": {"pod_labels": {f"example.com/team{tail}": "x"}}},
     'kubernetes.pod_labels."example.com/team\\n"'),
])
def test_a_name_or_key_with_a_trailing_newline_is_one_problem(change: Callable[[str], dict[str, Any]],
                                                               field: str) -> None:
    api.validate_data({**BASE, **change("")})  # the same without the newline is fine
    with pytest.raises(SpecError) as info:
        api.validate_data({**BASE, **change("\n")})
    [problem] = info.value.problems
    assert problem.render().startswith(f"{field}: is not a"), problem.render()


def test_a_tfjob_env_name_or_label_key_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    tfjob = yaml.safe_load((REPO / "examples" / "tfjob.yaml").read_text())
    tfjob["metadata"].setdefault("labels", {})["team\n"] = "ml"
    container = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container.setdefault("env", []).append({"name": "TOKEN\n", "value": "x"})
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(tfjob, sort_keys=False))
    with pytest.raises(SpecError) as info:
        api.load_spec(path, "k8s")
    fields = {p.path for p in info.value.problems}
    assert len(info.value.problems) == 2, [p.render() for p in info.value.problems]
    assert any("labels" in f and "team" in f for f in fields) and any("env" in f for f in fields), fields


def test_run_options_match_whole() -> None:
    assert [p.path for p in script_problems(ScriptRun(program="pkg.train\n", module=True, name="job\n"), False)] == \
        ["-m", "--name"]


def test_a_quantity_with_a_newline_is_not_a_quantity() -> None:
    assert byte_count("4Gi") == 4 * 2**30
    with pytest.raises(ValueError):
        byte_count("4Gi\n")
