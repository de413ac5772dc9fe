"""``tfcluster run -b compose``: a user's unmodified MWMS script in containers, straight from its directory
(real Docker engine): no Dockerfile, its requirements.txt installed into the workspace layer."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers.docker_engine import compose_cli, docker_engine, worker_image  # noqa: F401
from helpers.local_cluster import CLI
from helpers.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.tf]  # real TensorFlow in the containers


def test_an_unmodified_mwms_script_trains_in_containers_from_its_directory(docker_engine, worker_image, tmp_path) -> None:  # noqa: F811
    project = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "data" / "workspace", project)  # train.py imports tabulate, from requirements.txt
    images_before = {tag for image in docker_engine.images.list() for tag in image.tags}
    try:
        result = subprocess.run([*CLI, "run", "-b", "compose", "--name", "byo-compose", "--env", "TF_CPP_MIN_LOG_LEVEL=2",
                                 "train.py"], cwd=project, capture_output=True, text=True, timeout=600)
        logs = subprocess.run([*CLI, "logs", "byo-compose"], cwd=project, capture_output=True, text=True, timeout=60).stdout
        assert result.returncode == 0, logs[-3000:] + result.stderr
        assert logs.count("trained in /workspace") == 2, logs[-3000:]
    finally:
        subprocess.run([*CLI, "down", "byo-compose", "--volumes"], cwd=project, capture_output=True, timeout=120)
        for image in docker_engine.images.list():
            for tag in set(image.tags) - images_before:
                if tag.startswith("tfcluster-workspace-byo-compose:"):
                    docker_engine.images.remove(tag)
