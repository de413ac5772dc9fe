"""Safety property: ``down --volumes`` deletes no checkpoint store tfcluster did not create, on every backend.

A directory (local, Slurm), a volume (compose) or a claim (Kubernetes) that existed before the cluster, or that the
spec names, keeps every file; the rule has one home, ``launcher.backends.checkpoints``, which every backend's
``cancel(volumes=True)`` asks. Per backend:

- local: real ``tfcluster up``/``down`` subprocesses whose task only prints; ``checkpoint.dir`` the working directory
  and a directory that existed: ``down --volumes`` exits 2 with one line and does nothing (the cluster stays);
- Slurm: the real ``submit`` up to ``sbatch`` (the one Slurm command answered by a stand-in), then ``down -b slurm
  --volumes`` through the CLI while every Slurm command fails the test: the guard refuses before slurmctld is asked
  anything, and the dir ``submit`` created is deleted; with ``-m slurm`` the same refusal on the real cluster, the
  job still running after it;
- compose (``docker``): on the real engine, a volume of the checkpoint volume's name made beforehand keeps its files,
  and a compose project of the cluster's name that tfcluster did not start keeps its container and volume; the
  rendered file mounts no host directory at all (pure, fast lane);
- Kubernetes: through the CLI on the fake API server, a claim the spec names and a claim of the default name made
  beforehand are kept as they were, while the claim tfcluster created is deleted (the check is not vacuous).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from fakes.kubernetes_api import FakeKubernetes
from helpers.docker_engine import IMAGE, Clusters, compose_cli, docker_engine  # noqa: F401
from helpers.k8s_fake import fake_fixture  # noqa: F401
from helpers.local_cluster import tfcluster, write_spec
from helpers.required import unavailable
from helpers.run_names import run_name
from helpers.slurm_cluster import assert_nothing_left, job_id, slurm_controller, task_processes, wait_status  # noqa: F401
from launcher import api
from launcher.backends import checkpoints
from launcher.backends.compose.render import PROJECT_LABEL
from launcher.backends.local.state import LocalState
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.cli.commands import main
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.status import State

#: The user's project: what must survive every refused or partial ``down --volumes``.
USER_FILES = ("train.py", "data/train.csv", ".env", "ckpt/mine.txt")
#: ``checkpoint.dir`` values naming a directory the user had: the working directory itself, and one that existed.
USER_DIRS = (".", "ckpt")
PRINTS = [sys.executable, "-c", "print('ran', flush=True)"]


def user_project(root: Path) -> Path:
    for relative in USER_FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(f"the user's {relative}\n")
    return root


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def refused_in_one_line(returncode: int, stderr: str) -> None:
    assert returncode == 2, stderr
    [line] = stderr.strip().splitlines()
    assert line.startswith("checkpoint.dir: ") and "without --volumes" in line and "Traceback" not in stderr


# -- local: real processes ------------------------------------------------------------------------------------------

def local(request: pytest.FixtureRequest) -> None:
    project = user_project(request.getfixturevalue("tmp_path") / "project")
    for directory in USER_DIRS:
        before = files(project)
        spec = write_spec(project.parent, {"name": "keep", "roles": {"chief": {"command": PRINTS}},
                                           "checkpoint": {"dir": directory}})
        assert tfcluster("up", str(spec), cwd=project).returncode == 0
        refused = tfcluster("down", "keep", "--volumes", cwd=project)
        refused_in_one_line(refused.returncode, refused.stderr)
        assert LocalState.named("keep").exists(), "a refused down must do nothing"
        assert tfcluster("down", "keep", cwd=project).returncode == 0
        assert files(project) == before


# -- Slurm: the guard answers before slurmctld is asked ---------------------------------------------------------------

def slurm(request: pytest.FixtureRequest) -> None:
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    project = user_project(request.getfixturevalue("tmp_path") / "project")
    monkeypatch.chdir(project)  # the submit directory

    def sbatch_only(args: list[str], retries: int = 1, cwd: str | None = None) -> str:
        assert args[0] == "sbatch", f"submit asked Slurm more than sbatch: {args}"
        return "4242\n"

    asked: list[list[str]] = []

    def no_slurm(args: list[str], retries: int = 1, cwd: str | None = None) -> str:
        asked.append(args)
        raise AssertionError(f"down --volumes asked Slurm {args} before refusing")

    for directory in USER_DIRS:
        before = files(project)
        spec = write_spec(project.parent, {"name": "keep", "roles": {"chief": {"command": PRINTS}},
                                           "checkpoint": {"dir": directory}})
        monkeypatch.setattr(slurmctl, "run", sbatch_only)
        SlurmBackend().submit(api.dry_run(spec, BackendKind.SLURM, api.new_run_id(), launching=True))
        monkeypatch.setattr(slurmctl, "run", no_slurm)
        result = CliRunner().invoke(main, ["down", "keep", "-b", "slurm", "--volumes"])
        refused_in_one_line(result.exit_code, result.stderr)
        assert asked == [] and SlurmState.named("keep").read_job_id() == "4242", "a refused down must do nothing"
        SlurmState.named("keep").remove()
        assert files(project) == before
    before = files(project)  # the dir submit created (and marked) is deleted, and only it: the check is not vacuous
    spec = write_spec(project.parent, {"name": "made", "roles": {"chief": {"command": PRINTS}}})
    monkeypatch.setattr(slurmctl, "run", sbatch_only)
    SlurmBackend().submit(api.dry_run(spec, BackendKind.SLURM, api.new_run_id(), launching=True))
    assert (project / "tfcluster-runs" / "made" / checkpoints.CREATED_FILE).is_file()
    monkeypatch.setattr(slurmctl, "run", lambda args, retries=1, cwd=None: "")  # Slurm no longer knows the job
    result = CliRunner().invoke(main, ["down", "made", "-b", "slurm", "--volumes"])
    assert result.exit_code == 0, result.output
    assert not (project / "tfcluster-runs" / "made").exists() and files(project) == before


# -- compose: the real engine ----------------------------------------------------------------------------------------

@pytest.fixture
def compose_clusters(docker_engine: Any, compose_cli: list[str], tmp_path: Path) -> Iterator[Clusters]:  # noqa: F811
    """Clusters on the real engine with the worker image as it is (these tasks only run ``python``: not rebuilt)."""
    if not docker_engine.images.list(name=IMAGE):
        unavailable(f"{IMAGE} is not on this engine (.ci/docker.sh or `tfcluster build` makes it)")
    launched = Clusters(tmp_path)
    yield launched
    launched.down_all()


def volume_files(engine: Any, volume: str) -> str:
    return engine.containers.run(IMAGE, ["sh", "-c", "cd /v && find . -type f | sort | xargs -r cat"], remove=True,
                                 volumes={volume: {"bind": "/v", "mode": "ro"}}).decode()


def compose(request: pytest.FixtureRequest) -> None:
    import docker.errors

    engine = request.getfixturevalue("docker_engine")
    clusters: Clusters = request.getfixturevalue("compose_clusters")
    name, their_project = run_name("keep"), run_name("theirs")
    mine = engine.volumes.create(naming.checkpoint_volume_name(name))
    theirs = engine.volumes.create(f"{their_project}_data", labels={PROJECT_LABEL: their_project})
    their_app = None
    try:
        for volume in (mine, theirs):
            engine.containers.run(IMAGE, ["sh", "-c", f"echo mine: {volume.name} > /v/precious"], remove=True,
                                  user="root", volumes={volume.name: {"bind": "/v"}})
        their_app = engine.containers.create(IMAGE, ["true"], name=f"{their_project}-app",
                                             labels={PROJECT_LABEL: their_project},
                                             volumes={theirs.name: {"bind": "/data"}})
        clusters.up({"name": name, "roles": {"worker": {"command": ["python", "-c", "pass"]}}})
        assert clusters.wait(name, timeout=120).state is State.SUCCEEDED
        down = tfcluster("down", name, "-b", "compose", "--volumes", cwd=clusters.tmp_path)
        assert down.returncode == 0, down.stderr
        not_ours = tfcluster("down", their_project, "-b", "compose", "--volumes", cwd=clusters.tmp_path)
        assert not_ours.returncode == 1 and f"no cluster named '{their_project}'" in not_ours.stderr, not_ours.stderr
        their_app.reload()  # NotFound if down removed it
        assert volume_files(engine, mine.name) == f"mine: {mine.name}\n"
        assert volume_files(engine, theirs.name) == f"mine: {theirs.name}\n"
    finally:
        for thing in (their_app, mine, theirs):
            try:
                if thing is not None:
                    thing.remove(force=True)
            except docker.errors.NotFound:
                pass  # what a failing down removed


def test_compose_mounts_no_host_directory_and_labels_the_one_volume_it_may_delete(tmp_path: Path) -> None:
    """What compose's ``down --volumes`` could delete: a named volume tfcluster's labels mark, never a host dir."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = write_spec(tmp_path, {"name": "keep", "workspace": str(tmp_path), "command": ["python", "train.py"],
                                 "roles": {"chief": {}, "worker": {"replicas": 1}}})
    document = yaml.safe_load(next(iter(api.dry_run(spec, BackendKind.COMPOSE).files.values())))
    mounts = [m for service in document["services"].values() for m in service.get("volumes", [])]
    assert mounts and all(isinstance(m, dict) and m["type"] == "volume" for m in mounts), mounts
    named = {m["source"] for m in mounts if "source" in m}
    assert named == set(document["volumes"]) == {naming.checkpoint_volume_name("keep")}
    assert all(checkpoints.created_for(v["labels"], "keep") for v in document["volumes"].values())


# -- Kubernetes: the fake API server ---------------------------------------------------------------------------------

def claim(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteMany"],
                                                 "resources": {"requests": {"storage": "1Gi"}}}}


def kubernetes(request: pytest.FixtureRequest) -> None:
    fake: FakeKubernetes = request.getfixturevalue("fake")
    tmp_path: Path = request.getfixturevalue("tmp_path")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
              "users": [{"name": "dev", "user": {"token": "not-a-secret"}}],
              "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "dev"}}], "current-context": "fake"}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    users = {"named": claim("datasets"), "existed": claim(naming.checkpoint_volume_name("existed"))}
    for user_claim in users.values():
        fake.create("persistentvolumeclaims", "default", user_claim)
    kept = {name: fake.get("persistentvolumeclaims", c["metadata"]["name"]) for name, c in users.items()}
    specs = {"named": {"kubernetes": {"volume_claim": {"name": "datasets"}}}, "existed": {}, "made": {}}
    cli = CliRunner()
    for name, fields in specs.items():
        spec = write_spec(tmp_path, {"name": name, "roles": {"worker": {"replicas": 1}}, **fields})
        assert cli.invoke(main, ["up", str(spec), "-b", "k8s", "--detach"]).exit_code == 0
    assert fake.get("persistentvolumeclaims", naming.checkpoint_volume_name("made")) is not None
    for name in specs:
        result = cli.invoke(main, ["down", name, "--volumes"])
        assert result.exit_code == 0, result.output
    fake.now += 1  # Foreground deletion: the Jobs go once their pods are gone
    assert {name: fake.get("persistentvolumeclaims", c["metadata"]["name"]) for name, c in users.items()} == kept
    assert fake.get("persistentvolumeclaims", naming.checkpoint_volume_name("made")) is None  # tfcluster's: deleted


# -- the property, over every backend ---------------------------------------------------------------------------------

CHECKS: dict[BackendKind, Callable[[pytest.FixtureRequest], None]] = {
    BackendKind.LOCAL: local, BackendKind.SLURM: slurm, BackendKind.COMPOSE: compose, BackendKind.K8S: kubernetes,
}
#: Backends whose check needs a real engine, and its marker.
ENGINE_MARKS = {BackendKind.COMPOSE: pytest.mark.docker}


@pytest.mark.parametrize("kind", [pytest.param(k, marks=ENGINE_MARKS.get(k, ()), id=k.value) for k in BackendKind])
def test_down_volumes_keeps_every_file_of_a_store_tfcluster_did_not_create(
        kind: BackendKind, request: pytest.FixtureRequest) -> None:
    check = CHECKS.get(kind)
    if check is None:
        pytest.fail(f"no down --volumes safety check for the {kind.value} backend: add one to {__name__}")
    check(request)


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_controller")
def test_slurm_down_volumes_on_the_real_cluster_refuses_and_leaves_the_job_running(tmp_path: Path) -> None:
    project = user_project(tmp_path / "project")
    before = files(project)
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    name = run_name("keep-real")
    spec = write_spec(tmp_path, {"name": name, "roles": {"chief": {"command": sleeper}},
                                 "checkpoint": {"dir": ".", "save_grace_seconds": 5}})
    up = tfcluster("up", str(spec), "-b", "slurm", "-d", cwd=project)
    assert up.returncode == 0, up.stderr
    ran = job_id(name)
    try:
        wait_status(name, lambda s: s.state is State.RUNNING and len(task_processes(name)) >= 2, 60)
        refused = tfcluster("down", name, "-b", "slurm", "--volumes", cwd=project)
        refused_in_one_line(refused.returncode, refused.stderr)
        job = slurmctl.job(ran) if ran else None
        assert job is not None and not job.ended, f"a refused down must leave the job alone: {job}"
    finally:
        assert tfcluster("down", name, "-b", "slurm", cwd=project, timeout=180).returncode == 0
    assert_nothing_left(name, ran)
    assert files(project) == before
