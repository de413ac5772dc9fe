"""The removal guard every backend's ``down --volumes`` calls: a checkpoint dir, volume or claim is deleted only if
tfcluster created it for that cluster (``launcher.backends.checkpoints``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher import api
from launcher.api import validate_data
from launcher.backends import checkpoints
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.spec.problems import SpecError


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
    assert json.loads((directory / checkpoints.CREATED_FILE).read_text()) == {"cluster": "demo", "run_id": "run-1"}
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
        (directory.resolve() / checkpoints.CREATED_FILE).write_text(json.dumps({"cluster": "demo"}))
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
    (places / "ckpt" / checkpoints.CREATED_FILE).symlink_to(tmp_path / "real")
    assert checkpoints.removal_problem(places / "ckpt", "demo", places) is not None


def test_a_file_in_the_way_is_one_line(places: Path) -> None:
    (places / "ckpt").write_text("a file")
    with pytest.raises(LaunchError, match="exists and is not a directory"):
        checkpoints.prepare(places / "ckpt", "demo", "run-1")


@pytest.mark.parametrize("kind", [BackendKind.LOCAL, BackendKind.SLURM], ids=lambda k: k.value)
def test_guard_of_a_plan_refuses_with_one_problem_and_passes_the_dir_prepare_for_made(
        places: Path, kind: BackendKind) -> None:
    def plan(directory: str) -> Plan:
        return api.plan(validate_data({"name": "demo", "roles": {"worker": {"command": ["true"]}},
                                       "checkpoint": {"dir": directory}}), kind, "run-1")

    with pytest.raises(SpecError) as refused:
        checkpoints.guard(plan("."))
    assert [p.path for p in refused.value.problems] == ["checkpoint.dir"]
    made = plan("runs/demo")
    checkpoints.prepare_for(made)
    assert checkpoints.guard(made) == places / "runs" / "demo"
    assert checkpoints.guard(plan("gs://bucket/ckpt")) is None  # an object store: never deleted
    checkpoints.prepare_for(plan("gs://bucket/ckpt"))
    assert sorted(p.name for p in places.iterdir()) == ["runs"]


@pytest.mark.parametrize("labels, created", [
    (naming.labels("demo", "run-1"), True),
    ({naming.LABEL_MANAGED: naming.MANAGER, naming.LABEL_CLUSTER: "demo"}, True),
    (naming.labels("other", "run-1"), False),
    ({naming.LABEL_CLUSTER: "demo"}, False),  # names the cluster, but not made by tfcluster
    ({naming.LABEL_MANAGED: naming.MANAGER}, False),
    ({"com.docker.compose.project": "demo"}, False),
    ({}, False),
    (None, False),
])
def test_an_engine_object_is_tfclusters_only_with_both_labels(labels: dict[str, str] | None, created: bool) -> None:
    assert checkpoints.created_for(labels, "demo") is created
