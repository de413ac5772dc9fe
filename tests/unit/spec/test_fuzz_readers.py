"""Fuzz every reader through the CLI: random and hostile specs, TFJobs and YAML text, fed to ``validate``,
``convert``, ``dry-run`` (every backend) and ``render``. Each must exit 0 or 2, with no traceback and only
one-line, printable problems; a corpus of the worst shapes runs under a 1 GiB address-space limit.

Derandomized (the same examples every run) so the fast lane stays reproducible; the ``workspace`` field is
left out of generated specs (it names a directory to scan, whose bounds the workspace tests cover), and
replica counts stay small or out of range (a valid 10,000-worker dry-run is quadratic output by nature).
"""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import REPO
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
GIB = 1024**3

HOSTILE_STRINGS = ["", " ", "a\nb: forged", "\x1b[2J\x1b[31m", "\x00", "\u2028", "../../etc", "/", "/checkpoints/../etc",
                   "/x/../tmp", "${HOME}", "$(rm -rf /)", "`id`", "; rm -rf /", "Ubuntu", "img\nRUN evil", "x" * 300,
                   "gs://", "-rf", "--help", "ü", "TF_CONFIG", "TFCLUSTER_JOB", "*", "**/..", "~"]
SCALARS = (st.none() | st.booleans() | st.sampled_from([-1, 0, 1, 3, 2**63, 10**30, 0.5, float("inf")])
           | st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=6) | st.integers(0, 3), inner,
                                        max_size=3), max_leaves=8)

SPEC_BASE: dict[str, Any] = {k: v for k, v in yaml.safe_load((REPO / "examples" / "reference.yaml").read_text()).items()
                             if k != "workspace"}
TFJOB_BASE: dict[str, Any] = yaml.safe_load((REPO / "examples" / "tfjob.yaml").read_text())


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``node`` (mapping keys and list indices)."""
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    found = []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with up to four values replaced by hostile ones, or hostile keys added beside them."""
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(document)))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if not isinstance(parent, (dict, list)) or (isinstance(parent, list) and path[-1] >= len(parent)):
            continue
        if draw(st.booleans()) or isinstance(parent, list):
            parent[path[-1]] = draw(VALUES)
        else:
            parent[draw(st.sampled_from(HOSTILE_STRINGS) | st.integers(0, 3))] = draw(VALUES)
    document.pop("workspace", None)
    return document


def _clean(result: Result) -> None:
    """Exit 0, or 2 with one printable line per problem; never a traceback, never another exception."""
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert lines and all(line.isprintable() for line in lines), lines


def _every_reader(cli: CliRunner, path: Path, out: Path, *, tfjob: bool) -> None:
    commands = [["validate", str(path)]]
    commands += [["dry-run", str(path), "-b", kind.value, "-o", output]
                 for kind in BackendKind for output in ("text", "plan")]
    commands += [["render", str(path), "-b", "compose", "-d", str(out / "compose")],
                 ["render", str(path), "-b", "k8s", "-d", str(out / "k8s")],
                 ["render", str(path), "-b", "k8s", "-d", str(out / "tfjob"), "--format", "tfjob"]]
    if tfjob:
        commands.append(["convert", str(path)])
    for command in commands:
        _clean(cli.invoke(main, command))


@FUZZ
@given(document=mutated(SPEC_BASE))
def test_hostile_specs(document: dict[str, Any], cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    _every_reader(cli, path, tmp_path, tfjob=False)


@FUZZ
@given(document=mutated(TFJOB_BASE))
def test_hostile_tfjobs(document: dict[str, Any], cli: CliRunner, tmp_path: Path) -> None:
    document.update(apiVersion="kubeflow.org/v1", kind="TFJob")
    path = tmp_path / "tfjob.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    _every_reader(cli, path, tmp_path, tfjob=True)


#: Fragments of YAML text a parser or a loader has stumbled on: tags, anchors, merge keys, odd scalars.
FRAGMENTS = ["!!python/object:os.system ls", "!!binary aGVsbG8=", "2001-12-14t21:59:43.10-05:00", ".inf", "0o777",
             "&a [*a]", "<<: {name: x}", "? [a, b]\n: c", "*undefined", "%YAML 1.1\n---", "--- a\n--- b", "\t", "@",
             "'\\x00'", "\"\\e[31m\"", "{[1]: 2}", "!!set {a, b}", "!custom x", "name: &n demo\nother: *n",
             "apiVersion: kubeflow.org/v1\nkind: TFJob", "roles: {worker: {replicas: 1}}", "name: demo"]


@FUZZ
@given(parts=st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=20), min_size=1, max_size=5),
       joiner=st.sampled_from(["\n", "\n  ", ": ", " "]))
def test_hostile_yaml_text(parts: list[str], joiner: str, cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "text.yaml"
    path.write_text(joiner.join(parts))
    for command in (["validate", str(path)], ["convert", str(path)],
                    *(["dry-run", str(path), "-b", kind.value] for kind in BackendKind)):
        _clean(cli.invoke(main, command))


def _alias_nest(levels: int, width: int) -> str:
    lines = ["x:", "  a0: &a0 " + "[" * width + "1" + "]" * width]
    lines += [f"  a{i}: &a{i} [" + "[" * width + f"*a{i - 1}" + "]" * width + f", *a{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


#: The worst shapes known, each a few KB: billion laughs, alias-built nesting, deep flow nesting, long keys.
CORPUS = {
    "laughs.yaml": "\n".join([f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" if i else 'l0: &l0 ["lol"]'
                              for i in range(10)]) + "\nname: x\nroles: {worker: {}}\n",
    "aliased.yaml": "name: x\nroles: {worker: {}}\n" + _alias_nest(40, 60),
    "tfjob-aliased.yaml": "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: j}\n" + _alias_nest(40, 60),
    "deep.yaml": "name: x\nroles: {worker: {}}\nenv: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
    "keys.yaml": "name: x\nroles: {worker: {}}\nenv: {" + ", ".join(f"K{i}{'x' * 200}: v" for i in range(2000)) + "}\n",
    "command.yaml": "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: j}\nspec: {tfReplicaSpecs: {Worker: "
                    "{template: {spec: {containers: [{name: tensorflow, image: img, command: '" + "x" * 100_000 + "'}]}}}}}\n",
}

DRIVER = """
import json, sys
from launcher.cli.commands import main
codes = {}
for path in sys.argv[2:]:
    for command in (["validate", path], ["convert", path], ["dry-run", path, "-b", "k8s", "-o", "plan"]):
        try:
            main(command, standalone_mode=True)
        except SystemExit as exc:
            codes.setdefault(path.rsplit("/", 1)[-1], []).append(exc.code or 0)
with open(sys.argv[1], "w") as out:
    json.dump(codes, out)
"""
#: What each corpus file gives from validate, convert and dry-run (keys.yaml is a large but valid spec).
EXPECTED = {name: [2, 2, 2] for name in CORPUS} | {"keys.yaml": [0, 2, 0]}


def test_the_worst_shapes_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    paths = []
    for name, text in CORPUS.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))

    codes = tmp_path / "codes.json"
    result = subprocess.run([sys.executable, "-c", DRIVER, str(codes), *paths], capture_output=True, text=True,
                            preexec_fn=limit, timeout=300, cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert json.loads(codes.read_text()) == EXPECTED, result.stderr[-2000:]
    assert all(line.isprintable() for line in result.stderr.splitlines())


@pytest.mark.parametrize("kind", list(BackendKind))
def test_the_reference_spec_and_tfjob_still_pass_every_reader(cli: CliRunner, tmp_path: Path, kind: BackendKind) -> None:
    """The fuzz bases themselves are valid, so mutations start from a document every reader takes."""
    for base, name in ((SPEC_BASE, "spec.yaml"), (TFJOB_BASE, "tfjob.yaml")):
        path = tmp_path / name
        path.write_text(yaml.safe_dump(base))
        result = cli.invoke(main, ["dry-run", str(path), "-b", kind.value])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("roles", ["null", "{}", "{ps: {}}", "{chief: {replicas: 2}}"])
@pytest.mark.parametrize("kind", list(BackendKind))
def test_a_spec_the_planner_cannot_plan_is_refused_by_every_backend(cli: CliRunner, tmp_path: Path, roles: str,
                                                                    kind: BackendKind) -> None:
    """Found by the fuzz: a backend's rules planned a spec with no task to train and raised StopIteration."""
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: x\nroles: {roles}\n")
    result = cli.invoke(main, ["dry-run", str(path), "-b", kind.value])
    _clean(result)
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and lines and all(": roles" in line for line in lines), result.output
