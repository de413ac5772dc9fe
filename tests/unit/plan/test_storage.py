"""The one path rule (``launcher.plan.storage``) over each target's ``Storage``: what each target states, and how a
path is read (normalised, a relative one from the working directory). ``tests/safety/test_safety_bad_paths.py``
holds the rule through ``validate`` for every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher import api
from launcher.backends import backend_class
from launcher.backends.kubernetes.pods import CONFIG_DIR
from launcher.backends.slurm.target import SlurmTarget
from launcher.plan.storage import clash, storage_problems
from launcher.plan.targets import BackendKind, Storage
from launcher.plan.workspace import CONTAINER_WORKSPACE


def spec(**fields: Any) -> Any:
    return api.validate_data({"name": "st", "roles": {"worker": {"replicas": 2}}, **fields})


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_every_backend_validates_with_its_targets_storage(kind: BackendKind, monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate`` asks ``storage_problems`` with the backend's own target: a rule stated there reaches it."""
    cls = backend_class(kind)
    bad = spec(checkpoint={"dir": "/checkpoints/run"})
    assert cls.validate(bad) == []
    target = type(cls.target(bad))
    monkeypatch.setattr(target, "storage", lambda self, s: Storage(in_containers=False, node_local=("/checkpoints",)))
    [problem] = cls.validate(bad)
    assert problem.path == "checkpoint.dir" and "local to each node (in /checkpoints)" in problem.message


def test_kubernetes_states_each_mount_of_its_pods_and_the_workspace_only_with_one() -> None:
    target = backend_class(BackendKind.K8S).target(spec())
    mounts = target.storage(spec()).mounts
    assert {"/tmp", CONFIG_DIR, "/proc", "/etc/hosts"} <= set(mounts) and CONTAINER_WORKSPACE not in mounts
    assert CONTAINER_WORKSPACE in target.storage(spec(workspace="src")).mounts


def test_a_relative_path_on_slurm_is_in_the_submit_directory_wherever_that_is(tmp_path: Path) -> None:
    """The node-local rule reads what the user wrote: a relative dir is in the (shared) submit directory, even
    when this test's one is under /tmp; an absolute one under /tmp, however spelled, is node-local."""
    target = SlurmTarget(spec(), workdir=tmp_path)
    assert str(tmp_path).startswith("/tmp/")
    assert storage_problems(spec(checkpoint={"dir": "runs/a"}), target) == []
    [problem] = storage_problems(spec(checkpoint={"dir": "/x/../tmp/ck"}), target)
    assert problem.message.startswith("'/x/../tmp/ck' (/tmp/ck) is local to each node (in /tmp)")


def test_a_path_resolving_to_root_from_the_working_directory_is_refused(tmp_path: Path) -> None:
    target = SlurmTarget(spec(), workdir=tmp_path)
    up = "/".join([".."] * len(tmp_path.parts))
    [problem] = storage_problems(spec(checkpoint={"dir": up}), target)
    assert problem.message == f"{up!r} (/) is /, the whole filesystem: name a directory of its own"


@pytest.mark.parametrize(("path", "met"), [
    ("/tmp", "overlaps /tmp, scratch"), ("/tmp/a/..", "overlaps /tmp, scratch"), ("/", "overlaps /tmp, scratch"),
    ("/dev", "is or holds /dev, devices"), ("/dev/shm", None), ("/tmpfoo", None), ("/data", None),
])
def test_clash_is_at_in_or_holding_a_mount_and_being_or_holding_an_owned_dir(path: str, met: str | None) -> None:
    storage = Storage(in_containers=True, mounts={"/tmp": "scratch"}, owned={"/dev": "devices"})
    assert clash(path, storage) == met
