"""Fixtures for ``@pytest.mark.docker`` tests: a real Docker engine, Compose v2 and the worker image.

Contract: when env ``CI`` is set these fixtures FAIL if Docker or Compose v2
is unavailable (the docker tests are required there); otherwise they skip
with one line saying why. ``worker_image`` builds ``tfcluster-worker:latest``
once per test session (Docker's layer cache makes it a few seconds after
``.ci/docker.sh``); every module that needs it imports these fixtures.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.required import unavailable
from launcher import api
from launcher.backends.compose.backend import ComposeBackend, compose_command
from launcher.backends.compose.render import PROJECT_LABEL
from launcher.backends.interface import BackendOptions
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.status import JobStatus

IMAGE = "tfcluster-worker:latest"
BASE_IMAGE = os.environ.get("TFCLUSTER_BASE_IMAGE", "tfcluster-base:bookworm")
CA_BUNDLE = Path(os.environ.get("TFCLUSTER_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))


#: Finds the task's training process (``python -m launcher.worker``) inside its container.
FIND_TRAINER = """
import os, sys
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')
        uid = next(l.split()[1] for l in open(f'/proc/{pid}/status') if l.startswith('Uid:'))
    except OSError:
        continue
    if os.path.basename(argv[0]).startswith(b'python') and b'launcher.worker' in argv:
        print(pid, uid)
"""



def trainer(container: Any, timeout: float = 30) -> tuple[int, int]:
    """(pid, uid) of the training process (``python -m launcher.worker``) in ``container``, once it runs."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        found = container.exec_run(["python", "-c", FIND_TRAINER]).output.decode().split()
        if found:
            return int(found[0]), int(found[1])
        time.sleep(0.5)
    raise TimeoutError(f"no training process in {container.name}")


@functools.cache
def _engine() -> Any:
    from launcher.backends.image_build import docker_client

    return docker_client()


@functools.cache
def _build() -> str:
    from launcher.backends.image_build import build_image

    client = _engine()
    base = BASE_IMAGE if client.images.list(name=BASE_IMAGE) else None
    return build_image(IMAGE, base_image=base, ca_bundle=CA_BUNDLE if CA_BUNDLE.is_file() else None,
                       host_network=True, echo=lambda line: None)


@pytest.fixture(scope="session")
def compose_cli() -> list[str]:
    try:
        return compose_command()
    except BackendUnavailable as exc:
        unavailable(f"Docker Compose v2 is unavailable: {exc}", "docker")


@pytest.fixture(scope="session")
def docker_engine() -> Any:
    try:
        return _engine()
    except BackendUnavailable as exc:
        unavailable(f"Docker is unavailable: {exc}", "docker")


@pytest.fixture(scope="session")
def worker_image(docker_engine: Any, compose_cli: list[str]) -> str:
    """The worker image id (built or rebuilt from the cache once per session)."""
    try:
        return _build()
    except LaunchError as exc:
        pytest.fail(f"building {IMAGE} failed: {exc}", pytrace=False)


class Clusters:
    """Launch specs on the compose backend; every cluster launched here is removed at teardown (``down_all``)."""

    def __init__(self, tmp_path: Path, backend: ComposeBackend | None = None):
        self.backend = backend or ComposeBackend.create(BackendOptions())
        self.tmp_path = tmp_path
        self.launched: list[str] = []

    def up(self, spec: dict[str, Any]) -> Plan:
        path = self.tmp_path / f"{spec['name']}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        dry_run = api.dry_run(path, "compose", api.new_run_id(), launching=True)
        self.launched.append(dry_run.plan.name)
        self.backend.submit(dry_run)
        return dry_run.plan

    def wait(self, name: str, timeout: float, until: Callable[[JobStatus], bool] | None = None) -> JobStatus:
        """Poll ``describe`` until the job is terminal (or ``until`` holds); fail after ``timeout``."""
        ends = time.monotonic() + timeout
        while True:
            job = self.backend.describe(name)
            assert job is not None, f"{name} vanished"
            if (until or (lambda j: j.state.terminal))(job):
                return job
            if time.monotonic() > ends:
                logs = "\n".join(list(self.backend.logs(name))[-40:])
                supervisor = StateDir.of(BackendKind.COMPOSE, name).log
                said = supervisor.read_text()[-4000:] if supervisor.is_file() else "(no supervisor log)"
                pytest.fail(f"{name} still {job.state.value} after {timeout} s: {job.message}\n{logs}\n"
                            f"its supervisor's log:\n{said}")
            time.sleep(0.5)

    def down_all(self) -> None:
        """Remove every cluster launched here, each one tried whatever the others did; then fail naming each
        removal that raised (other than "no cluster": the test removed it) and each cluster something is left of."""
        problems = []
        for name in dict.fromkeys(self.launched):
            try:
                self.backend.cancel(name, volumes=True)
            except LaunchError:
                pass  # no such cluster (the test took it down), or judged by what is left below
            except Exception as exc:  # noqa: BLE001  (every teardown is tried; this one is reported below)
                problems.append(f"{name}: removing it failed: {type(exc).__name__}: {exc}")
            try:
                left = self.left(name)
            except Exception as exc:  # noqa: BLE001
                left = [f"(cannot tell: {type(exc).__name__}: {exc})"]
            if left:
                problems.append(f"{name}: left behind: {', '.join(left)}")
        if problems:
            pytest.fail("tearing the test's clusters down failed:\n" + "\n".join(problems), pytrace=False)

    def left(self, name: str) -> list[str]:
        """What is left of cluster ``name``: its Compose project's containers, networks and volumes, its state."""
        label = {"label": f"{PROJECT_LABEL}={name}"}
        client = self.backend.client
        found = [f"container {c.name}" for c in client.containers.list(all=True, filters=label, ignore_removed=True)]
        found += [f"network {n.name}" for n in client.networks.list(filters=label)]
        found += [f"volume {v.name}" for v in client.volumes.list(filters=label)]
        state = StateDir.of(BackendKind.COMPOSE, name)
        return found + ([f"state {state.root}"] if state.root.exists() else [])


@pytest.fixture
def clusters(worker_image: str, tmp_path: Path) -> Iterator[Clusters]:
    launched = Clusters(tmp_path)
    yield launched
    launched.down_all()
