"""``down --volumes`` on local deletes a checkpoint dir only if tfcluster created it for that cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.backends.local import checkpoints
from launcher.errors import LaunchError


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake home holding the project (the current directory)."""
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(project)
    return project


def test_a_created_dir_is_marked_for_its_cluster_and_may_be_removed(places: Path) -> None:
    directory = places / "runs" / "demo"
    checkpoints.prepare(directory, "demo", "run-1")
    assert json.loads((directory / checkpoints.MARKER).read_text()) == {"cluster": "demo", "run_id": "run-1"}
    assert checkpoints.removal_problem(directory, "demo", places) is None
    problem = checkpoints.removal_problem(directory, "other", places)
    assert problem is not None and "not created by tfcluster for cluster 'other'" in problem.message
    checkpoints.remove(directory)
    assert not directory.exists() and (places / "runs").is_dir()
    checkpoints.remove(directory)  # gone: nothing to do


def test_an_existing_dir_is_not_marked(places: Path) -> None:
    (places / "ckpt").mkdir()
    checkpoints.prepare(places / "ckpt", "demo", "run-1")
    assert list((places / "ckpt").iterdir()) == []
    assert checkpoints.removal_problem(places / "ckpt", "demo", places) is not None


@pytest.mark.parametrize("relative, what", [
    (".", "is the directory the cluster was started from"), ("..", "is the home directory"),
    ("../..", "contains the home directory"), ("/", "is the root directory"),
    ("sub/../.", "is the directory the cluster was started from"),
])
def test_the_places_the_user_works_in_are_refused_even_when_marked(places: Path, relative: str, what: str) -> None:
    directory = places / relative
    if relative != "/":
        (directory.resolve() / checkpoints.MARKER).write_text(json.dumps({"cluster": "demo"}))
    problem = checkpoints.removal_problem(directory, "demo", places)
    assert problem is not None and problem.path == "checkpoint.dir" and what in problem.message
    assert "\n" not in problem.render()


def test_the_current_directory_counts_too_when_up_ran_elsewhere(places: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    checkpoints.prepare(places.parent / "runs", "demo", "r")
    problem = checkpoints.removal_problem(places.parent / "runs", "demo", elsewhere)
    assert problem is None
    problem = checkpoints.removal_problem(places.parent, "demo", elsewhere)
    assert problem is not None and "home directory" in problem.message


def test_a_marker_that_is_a_symlink_does_not_count(places: Path, tmp_path: Path) -> None:
    (tmp_path / "real").write_text(json.dumps({"cluster": "demo"}))
    (places / "ckpt").mkdir()
    (places / "ckpt" / checkpoints.MARKER).symlink_to(tmp_path / "real")
    assert checkpoints.removal_problem(places / "ckpt", "demo", places) is not None


def test_a_file_in_the_way_is_one_line(places: Path) -> None:
    (places / "ckpt").write_text("a file")
    with pytest.raises(LaunchError, match="exists and is not a directory"):
        checkpoints.prepare(places / "ckpt", "demo", "run-1")
