"""``tfcluster run -b compose``: a user's unmodified MWMS script in containers, straight from its directory
(real Docker engine): no Dockerfile, its requirements.txt installed into the workspace layer; the
containers hardened (read-only root, no capabilities) with the workspace, HOME and /tmp writable; credentials in the
directory, by name or by content, never reach the containers."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.docker_engine import compose_cli, docker_engine, worker_image  # noqa: F401
from helpers.local_cluster import CLI
from helpers.paths import REPO
from helpers.run_names import run_name
from helpers.workspaces import CONTENT_CREDENTIAL_FILES, NAMED_CREDENTIAL_FILES
from launcher.plan import naming

pytestmark = [pytest.mark.docker, pytest.mark.tf]  # real TensorFlow in the containers


#: Run by each task before the unmodified train.py: writes where a program writes, and where it may not.
WRITES = """
import errno, pathlib, runpy, tempfile
pathlib.Path("written-by-a-task").write_text("ok")
(pathlib.Path.home() / ".keras").mkdir(exist_ok=True)
(pathlib.Path.home() / ".keras" / "keras.json").write_text("{}")
with tempfile.NamedTemporaryFile() as scratch:
    scratch.write(b"ok")
try:
    open("/etc/written-by-a-task", "w")
except OSError as exc:
    root = "read-only: /etc" if exc.errno == errno.EROFS else str(exc)
print("writable: workspace home tmp;", root, flush=True)
runpy.run_path("train.py", run_name="__main__")
"""


def test_an_unmodified_mwms_script_trains_in_containers_from_its_directory(docker_engine, worker_image, tmp_path) -> None:  # noqa: F811
    project = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "data" / "workspace", project)  # train.py imports tabulate, from requirements.txt
    (project / "writes.py").write_text(WRITES)
    name = run_name("byo-compose")
    with cleaned_up(docker_engine, name, project):
        result = subprocess.run([*CLI, "run", "-b", "compose", "--name", name, "--env", "TF_CPP_MIN_LOG_LEVEL=2",
                                 "writes.py"], cwd=project, capture_output=True, text=True, timeout=600)
        logs = subprocess.run([*CLI, "logs", name], cwd=project, capture_output=True, text=True, timeout=60).stdout
        assert result.returncode == 0, logs[-3000:] + result.stderr
        assert logs.count("trained in /workspace") == 2, logs[-3000:]
        assert logs.count("writable: workspace home tmp; read-only: /etc") == 2, logs[-3000:]
        containers = docker_engine.containers.list(all=True, filters={"label": f"com.docker.compose.project={name}"})
        assert len(containers) == 2
        for container in containers:
            host = container.attrs["HostConfig"]
            assert (host["ReadonlyRootfs"], host["CapDrop"]) == (True, ["ALL"])
        state = naming.state_dir("compose", name)
        assert {oct(p.stat().st_mode & 0o777) for p in state.iterdir()} == {oct(0o600)}
        assert json.loads((state / "plan.json").read_text())["name"] == name
        assert oct(state.stat().st_mode & 0o777) == oct(0o700)
        workspaces = [m["Name"] for c in containers for m in c.attrs["Mounts"] if m["Destination"] == "/workspace"]
        assert len(workspaces) == 2
        down = subprocess.run([*CLI, "down", name, "--volumes"], cwd=project, capture_output=True, timeout=120)
        assert down.returncode == 0, down.stderr
        left = [v.name for v in docker_engine.volumes.list() if v.name in [*workspaces, f"{name}-checkpoints"]]
        assert not left, "down --volumes left volumes"


@contextlib.contextmanager
def cleaned_up(engine, name: str, project: Path) -> Iterator[None]:
    """Afterwards: ``down --volumes`` of cluster ``name`` and its workspace layers removed (``down`` keeps them)."""
    images_before = {tag for image in engine.images.list() for tag in image.tags}
    try:
        yield
    finally:
        subprocess.run([*CLI, "down", name, "--volumes"], cwd=project, capture_output=True, timeout=120)
        for image in engine.images.list():
            for tag in set(image.tags) - images_before:
                if tag.startswith(f"tfcluster-workspace-{name}:"):
                    engine.images.remove(tag)


#: Lists everything under the task's working directory (links as links), one JSON line.
LIST_WORKSPACE = """\
import json, os
found = []
for root, dirs, files in os.walk("."):
    found += [os.path.relpath(os.path.join(root, name)) + ("/" if name in dirs else "") for name in dirs + files]
print("workspace:", os.getcwd(), json.dumps(sorted(found)))
"""


def test_credentials_in_the_directory_never_reach_the_container_and_are_named_at_start(docker_engine, worker_image, tmp_path) -> None:  # noqa: F811
    project = tmp_path / "project"
    project.mkdir()
    for name, text in {**NAMED_CREDENTIAL_FILES, **CONTENT_CREDENTIAL_FILES, **dict.fromkeys(
            [".env.example", ".git/config", ".venv/bin/python", "pkg/util.py"], "secret\n")}.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    (project / "list_workspace.py").write_text(LIST_WORKSPACE)
    (project / ".dockerignore").write_text("!.env.example\n")
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_ecdsa").write_text("secret\n")
    (project / "ssh").symlink_to(tmp_path / "home" / ".ssh", target_is_directory=True)
    name = run_name("byo-secrets")
    with cleaned_up(docker_engine, name, project):
        result = subprocess.run([*CLI, "run", "-b", "compose", "--name", name, "--workers", "1", "list_workspace.py"],
                                cwd=project, capture_output=True, text=True, timeout=600)
        logs = subprocess.run([*CLI, "logs", name], cwd=project, capture_output=True, text=True, timeout=60).stdout
        assert result.returncode == 0, logs[-3000:] + result.stderr
        [listed] = [line.split("workspace: /workspace ", 1)[1] for line in logs.splitlines() if "workspace: /workspace " in line]
        assert json.loads(listed) == [".dockerignore", ".env.example", "list_workspace.py", "pkg/", "pkg/util.py"]
        [named] = [line for line in result.stderr.splitlines() if "left out as credentials" in line]
        assert all(repr(name) in named for name in (".aws/", ".ssh/", "id_rsa", ".env", "terraform.tfstate", ".kube/"))
        assert all(repr(name) in named for name in CONTENT_CREDENTIAL_FILES)  # by content, each with its rule:
        assert "'gcp/trainer.json' (a cloud service-account key)" in named and "'site/.htpasswd' (name matches **/.htpasswd)" in named
        secrets = {line for text in CONTENT_CREDENTIAL_FILES.values() for line in text.splitlines() if len(line) >= 20}
        assert not [line for line in secrets if line in logs + result.stdout + result.stderr]  # never printed
        assert "shipping what looks like credentials, as .dockerignore takes it back: '.env.example'" in result.stderr
