"""The worker image: its build context, its pins, and (with Docker) what the built image holds."""

from __future__ import annotations

import io
import tarfile
import tomllib
from pathlib import Path

import pytest

from helpers.docker_engine import compose_cli, docker_engine, worker_image  # noqa: F401  (fixtures)
from helpers.paths import REPO  # noqa: I001
from launcher.backends.images import CA_IN_CONTEXT, DOCKERFILE, build_context


def names(context: io.BytesIO) -> list[str]:
    with tarfile.open(fileobj=context) as tar:
        return tar.getnames()


def test_context_holds_the_sources_and_the_ca_bundle_only_when_given(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    plain, with_ca = names(build_context()), names(build_context(ca))
    assert {DOCKERFILE, "pyproject.toml", "launcher/__init__.py", "launcher/worker/__main__.py"} <= set(plain)
    assert CA_IN_CONTEXT not in plain and CA_IN_CONTEXT in with_ca
    assert not [n for n in plain if "__pycache__" in n]


def test_context_is_reproducible() -> None:
    assert build_context().getvalue() == build_context().getvalue()


def test_image_requirements_match_the_worker_extra() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["worker"]
    lines = (REPO / "worker_image" / "requirements.txt").read_text().splitlines()
    pinned = [line for line in lines if line and not line.startswith("#")]
    assert set(extra) <= set(pinned)
    assert not [p for p in pinned if p.startswith("tensorflow-cpu")]


def run_in_image(engine, image: str, *command: str, **options) -> str:
    return engine.containers.run(image, list(command), remove=True, **options).decode()


@pytest.mark.docker
def test_image_runs_tasks_as_non_root_under_tini(docker_engine, worker_image: str) -> None:  # noqa: F811
    script = "import os; print(os.getuid(), open('/proc/1/cmdline').read().split(chr(0))[0])"
    uid, init = run_in_image(docker_engine, worker_image, "python", "-c", script).split()
    assert uid != "0"
    assert init.endswith("tini")


@pytest.mark.docker
def test_image_has_the_worker_stack_but_not_the_controller_nor_the_build_ca(docker_engine, worker_image: str) -> None:  # noqa: F811
    script = (
        "import importlib.util as u, os, glob;"
        "print(*[bool(u.find_spec(m)) for m in ('tensorflow', 'tf_keras', 'pydantic', 'launcher.worker', 'click', 'docker')],"
        " bool(glob.glob('/tmp/build*')), os.stat('/checkpoints').st_uid)"
    )
    found = run_in_image(docker_engine, worker_image, "python", "-c", script).split()
    assert found == ["True", "True", "True", "True", "False", "False", "False", "1000"]
