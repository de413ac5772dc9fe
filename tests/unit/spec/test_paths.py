"""Paths are normalised before they are compared: '..' cannot step out of a volume, '/x/../tmp' is '/tmp'."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.cli.commands import main
from launcher.spec.paths import is_within, normalized


@pytest.mark.parametrize(("path", "expected"), [
    ("/x/../tmp", "/tmp"), ("/checkpoints/../etc", "/etc"), ("//a//b/", "/a/b"), ("/a/./b/.", "/a/b"),
    ("/..", "/"), ("a/../b", "b"),
])
def test_normalized(path: str, expected: str) -> None:
    assert normalized(path) == expected


@pytest.mark.parametrize(("path", "root", "inside"), [
    ("/checkpoints/../etc", "/checkpoints", False), ("/checkpoints/run/..", "/checkpoints", True),
    ("/checkpoints-old", "/checkpoints", False), ("/x/../tmp/a", "/tmp", True), ("/tmp", "/x/../tmp/", True),
])
def test_is_within(path: str, root: str, inside: bool) -> None:
    assert is_within(path, root) is inside


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", ""]), max_size=8))
def test_within_means_below_once_resolved(parts: list[str]) -> None:
    path = "/root/" + "/".join(parts)
    assert is_within(path, "/root") == (normalized(path) + "/").startswith("/root/")


def _validate(cli: CliRunner, tmp_path: Path, body: str, backend: str) -> tuple[int, str]:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: d\nroles: {worker: {}}\n" + body)
    result = cli.invoke(main, ["validate", str(spec), "-b", backend])
    return result.exit_code, result.stderr


def test_a_compose_checkpoint_dir_cannot_step_out_of_the_volume(cli: CliRunner, tmp_path: Path) -> None:
    code, err = _validate(cli, tmp_path, "checkpoint: {dir: /checkpoints/../etc}\n", "compose")
    assert code == 2 and "checkpoint.dir: on compose must be /checkpoints or a path below it" in err
    assert _validate(cli, tmp_path, "checkpoint: {dir: /checkpoints/a/../b}\n", "compose")[0] == 0


@pytest.mark.parametrize("backend", ["compose", "k8s"])
def test_a_tensorboard_dir_cannot_step_out_of_the_volume(cli: CliRunner, tmp_path: Path, backend: str) -> None:
    code, err = _validate(cli, tmp_path, "tensorboard: {dir: /checkpoints/../etc/tb}\n", backend)
    assert code == 2 and "tensorboard.dir: must lie in the checkpoint volume" in err, err


def test_a_mount_path_that_resolves_to_tmp_overlaps_tmp(cli: CliRunner, tmp_path: Path) -> None:
    body = ("kubernetes:\n  volumes: [{name: data, emptyDir: {}}]\n"
            "  volume_mounts: [{name: data, mount_path: /x/../tmp}]\n")
    code, err = _validate(cli, tmp_path, body, "k8s")
    assert code == 2 and "kubernetes.volume_mounts.0.mount_path: /x/../tmp overlaps /tmp" in err, err


def test_two_mounts_at_the_same_place_spelled_differently_are_one_place(cli: CliRunner, tmp_path: Path) -> None:
    body = ("kubernetes:\n  volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]\n"
            "  volume_mounts: [{name: a, mount_path: /data}, {name: b, mount_path: /y/../data/.}]\n")
    code, err = _validate(cli, tmp_path, body, "local")
    assert code == 2 and "kubernetes.volume_mounts.1.mount_path: a second mount at /data" in err, err
