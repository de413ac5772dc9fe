"""Property tests: planner invariants for random valid specs; clean errors for random invalid input."""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launcher.api import plan, validate_data
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind
from launcher.spec.models import RoleType

SEGMENT = r'([\w-]+|"([^"\\]|\\.)*")'
ERROR_LINE = re.compile(rf"^(\S+?:(\d+:)? )?(\(spec\)|{SEGMENT}(\.{SEGMENT})*): \S.*$")
FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def valid_specs(draw) -> dict:
    name = draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))
    ps = draw(st.integers(0, 3))
    chief = 1 if ps else draw(st.integers(0, 1))
    workers = draw(st.integers(1 if (ps or not chief) else 0, 64))
    roles = {"chief": chief, "worker": workers, "ps": ps, "evaluator": draw(st.integers(0, 1))}
    spec = {"name": name, "roles": {r: {"replicas": n} for r, n in roles.items() if n or draw(st.booleans())}}
    if chief + workers == 1 and not ps:
        spec["strategy"] = draw(st.sampled_from(["auto", "mirrored", "one_device", "default", "central_storage"]))
    elif not ps:
        spec["strategy"] = draw(st.sampled_from(["auto", "multi_worker_mirrored"]))
    else:
        spec["strategy"] = draw(st.sampled_from(["auto", "parameter_server"]))
    return spec


@FAST
@given(spec=valid_specs(), backend=st.sampled_from(list(BackendKind)))
def test_plan_invariants(spec: dict, backend: BackendKind) -> None:
    result = plan(validate_data(spec), backend)
    training = [t for t in result.tasks if t.type is not RoleType.EVALUATOR]
    clusters = [result.tf_config(t)["cluster"] for t in training]
    assert all(c == clusters[0] for c in clusters), "training tasks must share one cluster"
    assert "evaluator" not in clusters[0]
    for role in RoleType:
        indices = [t.index for t in result.tasks if t.type is role]
        assert indices == list(range(len(indices))), f"{role} indices must be contiguous from 0"
        assert len(indices) == spec["roles"].get(role.value, {}).get("replicas", 0)
    addresses = [t.address for t in result.tasks]
    assert len(set(addresses)) == len(addresses)
    assert len({t.name for t in result.tasks}) == len(result.tasks)
    for task in result.tasks:
        tf_config = result.tf_config(task)
        assert tf_config["task"] == {"type": task.type.value, "index": task.index}
        own_role = tf_config["cluster"][task.type.value]
        assert own_role[task.index] == task.address


def _assert_clean_failure(result) -> None:
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert lines, "at least one problem line"
    assert "Traceback" not in result.output
    for line in lines:
        assert ERROR_LINE.match(line), f"not a one-line problem: {line!r}"


MUTATIONS = [
    lambda s: s["roles"].setdefault("worker", {}).update(replicas=-1),
    lambda s: s["roles"].setdefault("chief", {}).update(replicas=2),
    lambda s: s["roles"].setdefault("ps", {}).update(replicas=1) or s.update(strategy="multi_worker_mirrored"),
    lambda s: s.update(name="Not_A_Label"),
    lambda s: s.update(name="x" * 60),
    lambda s: s.update(nmae="typo"),
    lambda s: s["roles"].update(evaluater={}),
    lambda s: s.update(strategy="tpu"),
    lambda s: s.update(restart={"policy": "sometimes"}),
    lambda s: s["roles"].setdefault("worker", {}).update(port=80),
    lambda s: s.update(env={"TF_CONFIG": "{}"}),
    lambda s: s.pop("roles"),
]


@FAST
@given(spec=valid_specs(), mutations=st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=4))
def test_invalid_specs_fail_cleanly(spec: dict, mutations, cli, write_spec) -> None:
    for mutate in mutations:
        if "roles" in spec:
            mutate(spec)
    _assert_clean_failure(cli.invoke(main, ["validate", str(write_spec(spec))]))


@FAST
@given(text=st.text(max_size=300))
def test_yaml_garbage_fails_cleanly(text: str, cli, write_spec) -> None:
    for command in ("validate", "dry-run"):
        _assert_clean_failure(cli.invoke(main, [command, str(write_spec(text))]))


@FAST
@given(data=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                         lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                         max_leaves=12))
def test_random_structures_fail_cleanly(data, cli, write_spec) -> None:
    _assert_clean_failure(cli.invoke(main, ["validate", str(write_spec(yaml.safe_dump(data)))]))
