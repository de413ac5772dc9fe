"""The workspace image on a real Docker engine: built from a directory without a Dockerfile, rebuilt only on
change, pushed to and pulled from a real registry (Kubernetes), its requirements importable on an image of Debian's
system Python, and a plain MWMS script trained from it (compose)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fakes.kubernetes_api import FakeKubernetes
from helpers.docker_engine import BASE_IMAGE, Clusters, clusters, compose_cli, docker_engine, worker_image  # noqa: F401  (fixtures)
from helpers.paths import REPO
from helpers.registry import local_registry  # noqa: F401  (fixture)
from helpers.run_names import run_name
from launcher import api
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.workspace import BASE_LABEL, ensure_images
from launcher.supervision.status import State

pytestmark = pytest.mark.docker
SCRIPT_DIR = REPO / "tests" / "data" / "workspace"


@pytest.fixture(autouse=True)
def remove_layers(docker_engine: Any) -> Iterator[None]:  # noqa: F811
    """The layers these tests build are removed afterwards (``down`` keeps them: they are a cache)."""
    yield
    for image in docker_engine.images.list():
        for tag in image.tags:
            if "tfcluster-workspace-ws" in tag:
                docker_engine.images.remove(tag, noprune=False)


def workspace(tmp_path: Path) -> Path:
    """A copy of the script's directory, with things that must not ship."""
    root = tmp_path / "project"
    shutil.copytree(SCRIPT_DIR, root)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "data").mkdir()
    (root / "data" / "huge.bin").write_bytes(b"\0" * 1024)
    (root / ".dockerignore").write_text("data/\n")
    return root


def spec(name: str, root: Path, workers: int, **extra: Any) -> dict[str, Any]:
    return {"name": run_name(name), "workspace": str(root), "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
            "roles": {"worker": {"replicas": workers, "command": ["python", "train.py"]}}, **extra}


def run_in(engine: Any, image: str, script: str) -> str:
    return engine.containers.run(image, ["python", "-c", script], remove=True, user="1000").decode()


def test_layer_is_pushed_to_and_pulled_from_a_real_registry_by_the_kubernetes_backend(
    tmp_path: Path, docker_engine: Any, system_python_image: str, local_registry: str  # noqa: F811
) -> None:
    """The layer is built on the small image of Debian's system Python (the registry is new each session: on the
    1.3 GB worker image the push of its base layers took minutes); what is pushed, pulled and run is the same."""
    root = workspace(tmp_path)
    dry_run = api.dry_run(api.validate_data(spec("wsk8s", root, 2, image=system_python_image,
                                                 kubernetes={"registry": local_registry}), "k8s"), "k8s", "r1")
    tag = dry_run.plan.workspace.images[0].tag  # type: ignore[union-attr]
    fake = FakeKubernetes()
    url = fake.start()
    try:
        KubernetesBackend(client.ApiClient(client.Configuration(host=url)), None).submit(dry_run)
        job = fake.get("jobs", f"{dry_run.plan.name}-worker-0")  # one Job per task
    finally:
        fake.stop()
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == tag
    repository, _, version = tag.removeprefix(f"{local_registry}/").rpartition(":")
    with urllib.request.urlopen(f"http://{local_registry}/v2/{repository}/tags/list") as answer:
        assert json.load(answer)["tags"] == [version]
    docker_engine.images.remove(tag)  # what a node has: nothing but the registry
    docker_engine.images.pull(tag)
    found = run_in(docker_engine, tag, "import os, tabulate; print(os.getcwd(), sorted(os.listdir()), os.getuid())")
    assert found.split("\n")[0] == f"/workspace {sorted(['.dockerignore', 'requirements.txt', 'train.py'])} 1000"
    assert run_in(docker_engine, tag, "import shutil; print(shutil.which('tabulate'))").strip() == (
        "/opt/workspace-packages/bin/tabulate")  # the requirements' commands are on PATH
    assert run_as_the_pod(docker_engine, job["spec"]["template"]["spec"]) == sorted(
        [".dockerignore", "model.keras", "requirements.txt", "train.py"])


def run_as_the_pod(engine: Any, pod: dict[str, Any]) -> list[str]:
    """The pod's init container and task container on a real engine, read-only roots as uid 1000 sharing one
    volume as the emptyDir (0777, as the kubelet makes it): what the task lists after writing in its workdir."""
    [seed], [task] = pod["initContainers"], pod["containers"]
    [seed_mount] = seed["volumeMounts"]
    [work_mount] = [m for m in task["volumeMounts"] if m["name"] == seed_mount["name"]]
    volume = engine.volumes.create()
    options: dict[str, Any] = {"remove": True, "user": "1000", "read_only": True, "tmpfs": {"/tmp": ""}}
    try:
        engine.containers.run(task["image"], ["chmod", "0777", "/v"], remove=True, user="root", volumes={volume.name: {"bind": "/v"}})
        engine.containers.run(task["image"], seed["command"], volumes={volume.name: {"bind": seed_mount["mountPath"]}}, **options)
        script = "import os; open('model.keras', 'w').write('saved'); print(sorted(os.listdir()))"
        listed = engine.containers.run(task["image"], ["python", "-c", script],
                                       volumes={volume.name: {"bind": work_mount["mountPath"]}}, **options)
    finally:
        volume.remove(force=True)
    return json.loads(listed.decode().strip().replace("'", '"'))


def test_an_unchanged_workspace_is_not_rebuilt_and_a_change_is(tmp_path: Path, worker_image: str) -> None:  # noqa: F811
    root = workspace(tmp_path)

    def ensure(said: list[str]) -> str:
        plan = api.plan(api.validate_data(spec("wsre", root, 1), "compose"), "compose")
        ensure_images(plan.workspace, said.append)  # type: ignore[arg-type]
        return plan.tasks[0].image

    first: list[str] = []
    tag = ensure(first)
    again: list[str] = []
    assert ensure(again) == tag and again == [f"workspace: {tag} is up to date"]
    (root / "data" / "huge.bin").write_bytes(b"\1")  # ignored: same layer
    assert ensure([]) == tag
    (root / "train.py").write_text((root / "train.py").read_text() + "\n# changed\n")
    changed: list[str] = []
    assert ensure(changed) != tag and any("building" in line for line in changed)


def test_a_base_rebuilt_under_the_same_name_rebuilds_the_layer_on_it(
    tmp_path: Path, worker_image: str, docker_engine: Any  # noqa: F811
) -> None:
    """A new ``tfcluster build`` keeps the base's name and changes its content: a layer on the old base would
    run the old launcher, so it is rebuilt on the new one (and kept while the base stays the same)."""
    root = workspace(tmp_path)
    base = f"{run_name('tfcluster-test-ws-base')}:latest"

    def build_base(version: str) -> str:
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            dockerfile = f"FROM {worker_image}\nLABEL version={version}\n".encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))
        context.seek(0)
        return str(docker_engine.images.build(fileobj=context, custom_context=True, tag=base, rm=True)[0].id)

    def ensure() -> tuple[str, list[str]]:
        plan = api.plan(api.validate_data(spec("wsbase", root, 1, image=base), "compose"), "compose")
        said: list[str] = []
        ensure_images(plan.workspace, said.append)  # type: ignore[arg-type]
        return plan.tasks[0].image, said

    try:
        first = build_base("1")
        tag, _ = ensure()
        assert docker_engine.images.get(tag).labels[BASE_LABEL] == first
        assert ensure() == (tag, [f"workspace: {tag} is up to date"])
        second = build_base("2")
        again, said = ensure()
        assert again == tag and any(line.endswith(f"(its base {base} was rebuilt)") for line in said), said
        assert docker_engine.images.get(tag).labels[BASE_LABEL] == second
    finally:
        docker_engine.images.remove(base, noprune=False)


@pytest.mark.tf
def test_a_plain_mwms_script_trains_on_compose_from_its_directory(tmp_path: Path, clusters: Clusters, docker_engine: Any) -> None:  # noqa: F811
    plan = clusters.up(spec("wscompose", workspace(tmp_path), 2))
    job = clusters.wait(plan.name, timeout=300)
    logs = "\n".join(clusters.backend.logs(plan.name))
    assert job.state is State.SUCCEEDED, logs[-3000:]
    assert logs.count("trained in /workspace") == 2
    assert "worker" in logs and "loss" in logs


#: An ``--image`` as ``tensorflow/tensorflow`` images are: Debian's own Python (pip ``--prefix`` installs under
#: ``local/lib/python3.X/dist-packages`` and ``local/bin``) and a ``PYTHONPATH`` of its own.
SYSTEM_PYTHON_IMAGE = """\
FROM {base}
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip python-is-python3 >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
RUN mkdir /opt/own && echo "NAME = 'own'" > /opt/own/ownmod.py
ENV PYTHONPATH=/opt/own
"""


@pytest.fixture(scope="module")
def system_python_image(docker_engine: Any) -> str:  # noqa: F811
    """The tag of an image of Debian's system Python (``SYSTEM_PYTHON_IMAGE``), built once per module (Docker's
    cache makes it seconds after the first time); a small base for the layers of the tests here."""
    base = BASE_IMAGE if docker_engine.images.list(name=BASE_IMAGE) else "debian:bookworm-slim"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        dockerfile = SYSTEM_PYTHON_IMAGE.format(base=base).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    own, _ = docker_engine.images.build(fileobj=context, custom_context=True, tag=run_name("tfcluster-test-system-python"),
                                        network_mode="host", rm=True)
    return str(own.tags[0])


def test_requirements_are_importable_on_an_image_of_debians_system_python_which_keeps_its_pythonpath(
    tmp_path: Path, docker_engine: Any, system_python_image: str  # noqa: F811
) -> None:
    plan = api.plan(api.validate_data(spec("wssys", workspace(tmp_path), 1, image=system_python_image), "compose"), "compose")
    ensure_images(plan.workspace, lambda line: None)  # type: ignore[arg-type]
    script = "import shutil, ownmod, tabulate; print(tabulate.__file__, ownmod.NAME, shutil.which('tabulate'))"
    found = run_in(docker_engine, plan.tasks[0].image, script).split()
    assert found[0].startswith("/opt/workspace-packages/site-packages-1/") and found[1:] == [
        "own", "/opt/workspace-packages/bin/tabulate"]
