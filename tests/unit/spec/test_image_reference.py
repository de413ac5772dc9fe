"""Image references follow Docker's grammar wherever an image is named: junk is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.cli.commands import main
from launcher.spec.image_reference import MAX_REFERENCE, image_problem

VALID = ["ubuntu", "tfcluster-worker:latest", "python:3.11-slim", "localhost:5000/team/img:v1.2",
         "registry.example.com/a/b__c/d-e.f:Tag_1", "[::1]:5000/x", "Gcr.io/x/y",
         "img@sha256:" + "ab" * 32, "img:v1@sha256:" + "ab" * 32]
INVALID = ["", "Ubuntu", "my image", "img\nRUN rm -rf /", "img:", ":tag", "img:-tag", "a//b", "a/", "-a",
           "img@sha256:short", "img:" + "t" * 129, "a" * 256, "img\t", "img\x1b[31m", "ünï"]


@pytest.mark.parametrize("reference", VALID)
def test_references_docker_accepts_are_accepted(reference: str) -> None:
    assert image_problem(reference) is None


@pytest.mark.parametrize("reference", INVALID)
def test_junk_is_refused(reference: str) -> None:
    assert image_problem(reference) is not None


def test_backtracking_input_is_refused_at_once() -> None:
    """Inputs shaped to backtrack a naive expression; bounded by length first, then a linear-shaped pattern."""
    for reference in ("a" + "-" * 400 + "!", "a." * 150 + "!", "a" * 10_000_000):
        assert image_problem(reference) is not None


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(max_size=MAX_REFERENCE + 8))
def test_a_reference_accepted_holds_no_space_control_or_uppercase_path(text: str) -> None:
    if image_problem(text) is None:
        assert text.isascii() and text.isprintable() and " " not in text


@pytest.mark.parametrize("field", ["image", "roles.worker.image", "roles.chief.image", "tensorboard.image"])
def test_every_spec_field_naming_an_image_is_checked(cli: CliRunner, tmp_path: Path, field: str) -> None:
    spec: dict = {"name": "d", "roles": {"chief": {}, "worker": {}}}
    *parents, last = field.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = "img\nRUN evil"
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(spec))
    result = cli.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and f"{field}: not an image reference" in result.stderr
    assert "'img\\nRUN evil'" in result.stderr


def test_a_tfjob_container_image_is_checked(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "j"},
                                "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
                                    "containers": [{"name": "tensorflow", "image": "Bad Image"}]}}}}}}))
    result = cli.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{path}:1: spec.tfReplicaSpecs.Worker.template.spec.containers.0.image: "
                                    "not an image reference"), result.stderr


def test_run_image_is_checked_before_anything_starts(cli: CliRunner, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('never')\n")
    result = cli.invoke(main, ["run", "--image", "img\nFROM evil", "-b", "compose", "train.py"])
    assert result.exit_code == 2
    assert result.stderr == ("tfcluster run: image: not an image reference ([host[:port]/]path[:tag][@digest], "
                             "path in lowercase letters, digits and . _ -): 'img\\nFROM evil'\n")


@pytest.mark.parametrize("option", ["--tag", "--base-image"])
def test_build_options_are_checked(cli: CliRunner, option: str) -> None:
    result = cli.invoke(main, ["build", option, "A B"])
    assert result.exit_code == 2 and "not an image reference" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(("registry", "valid"), [
    ("registry.example.com", True), ("localhost:5000", True), ("127.0.0.1:5000/team/sub", True), ("myreg", True),
    ("Reg.io/Team", False), ("reg.io/", False), ("reg.io\n/x", False), ("reg io", False), ("", False),
])
def test_the_registry_is_an_image_reference_prefix(cli: CliRunner, tmp_path: Path, registry: str, valid: bool) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "d", "roles": {"worker": {}}, "kubernetes": {"registry": registry}}))
    result = cli.invoke(main, ["validate", str(path), "-b", "k8s"])
    assert (result.exit_code == 0) is valid, result.output
    if not valid:
        assert result.stderr.count("\n") == 1 and "kubernetes.registry: not a registry" in result.stderr


def test_the_registry_option_is_checked_by_the_same_rule(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "d", "roles": {"worker": {}}}))
    result = cli.invoke(main, ["dry-run", str(path), "-b", "k8s", "--registry", "localhost:5000/a\nFROM evil"])
    assert result.exit_code == 2
    assert result.stderr == (f"{path}:1: kubernetes.registry: not a registry (host[:port][/path], path in lowercase "
                             "letters, digits and . _ -): 'localhost:5000/a\\nFROM evil'\n")
