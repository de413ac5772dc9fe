"""A real container registry on this machine: Debian's ``docker-registry`` (the Distribution project's registry).

Contract: the ``local_registry`` fixture starts one registry per test session,
listening on a free loopback port with its storage in a temporary directory,
and yields its address (``127.0.0.1:PORT``; Docker pushes to loopback
registries over plain HTTP without configuration). Like the Docker fixtures it
fails under ``CI`` when the registry cannot run and skips elsewhere.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.boards import free_port
from helpers.required import unavailable

CONFIG = """version: 0.1
log: {{level: warn}}
storage: {{filesystem: {{rootdirectory: {root}}}, delete: {{enabled: true}}}}
http: {{addr: "127.0.0.1:{port}"}}
"""


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        unavailable("no docker-registry binary (apt-get install docker-registry; .ci/docker.sh does)", "docker")
    root: Path = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(CONFIG.format(root=root / "storage", port=port))
    log = (root / "registry.log").open("wb")
    process = subprocess.Popen([str(binary), "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    ready, deadline = False, time.monotonic() + 10
    while not ready and process.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
            ready = True
        except OSError:
            time.sleep(0.1)
    try:
        if not ready:
            unavailable(f"docker-registry did not answer on {address}: {(root / 'registry.log').read_text()[-500:]}", "docker")
        yield address
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
