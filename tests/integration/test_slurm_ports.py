"""Slurm jobs' port blocks on real nodes: each task binds the port its TF_CONFIG gives it.

Every node of the test cluster is this host (127.0.0.1), so two jobs share every node, as jobs of a real
cluster share nodes under ``OverSubscribe``. The tasks are a small program, no TensorFlow: it binds and
listens on its own address from TF_CONFIG (as a TF server would), says so with a marker file, and holds the
port until the test releases every task. Two ``slurm.ports: job-id`` jobs submitted one after the other hold
all four ports at once (with ports that are only the base plus the task's number both jobs would bind the
same two ports and one job would fail). A job of the default ``random`` block binds the ports its supervisor
computed from the secret it drew and keeps owner-only in the job's state dir, not those of its job id. A job
whose block holds a port another program listens on takes the next free block.
"""

from __future__ import annotations

import socket
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from helpers.local_cluster import tfcluster, write_spec
from helpers.run_names import run_name
from helpers.slurm_cluster import assert_nothing_left, job_id, slurm_controller, wait_status  # noqa: F401
from launcher.backends import ports as host_ports
from launcher.backends.slurm.placement import PORT_SPAN
from launcher.backends.slurm.state import SlurmState
from launcher.supervision.status import State

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_controller")]

NAMES = tuple(map(run_name, ("sl-port-a", "sl-port-b", "sl-port-random", "sl-port-busy")))
HOLD = """\
import json, os, pathlib, socket, sys, time
config = json.loads(os.environ["TF_CONFIG"])
host, port = config["cluster"][config["task"]["type"]][config["task"]["index"]].rsplit(":", 1)
server = socket.socket()
server.bind((host, int(port)))
server.listen()
pathlib.Path("bound-" + os.environ["TFCLUSTER_TASK_NAME"]).write_text(port)
ends = time.monotonic() + 240
while not pathlib.Path("release").exists():
    if time.monotonic() > ends:
        sys.exit("never released")
    time.sleep(0.1)
"""


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[None]:
    yield
    for name in NAMES:
        if SlurmState.named(name).exists():
            ran = job_id(name)
            tfcluster("down", name, "-b", "slurm", cwd=tmp_path, timeout=180)
            assert_nothing_left(name, ran)


def hold(tmp_path: Path, names: tuple[str, ...], ports: str, base: int = 2222) -> list[int]:
    """Submit a job per name whose two tasks hold their ports; the ports, once every task holds its own."""
    (tmp_path / "hold.py").write_text(HOLD)
    for name in names:
        spec = {"name": name, "roles": {"worker": {"replicas": 2, "port": base}}, "command": [sys.executable, "hold.py"],
                "restart": {"policy": "never"}, "slurm": {"ports": ports}}
        result = tfcluster("up", "-b", "slurm", "--detach", str(write_spec(tmp_path, spec)), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    markers = [tmp_path / f"bound-{name}-worker-{index}" for name in names for index in range(2)]
    ends = time.monotonic() + 180
    while not all(marker.exists() for marker in markers):
        for name in names:
            status = SlurmState.named(name).record.read_status()
            assert status is None or not status.state.terminal, f"{name} ended: {status}"
        assert time.monotonic() < ends, f"bound: {[m.name for m in markers if m.exists()]}"
        time.sleep(0.2)
    return [int(marker.read_text()) for marker in markers]


def release(tmp_path: Path, names: tuple[str, ...]) -> None:
    (tmp_path / "release").touch()
    for name in names:
        status = wait_status(name, lambda s: s.state.terminal, timeout=120)
        assert status.state is State.SUCCEEDED, status


def test_two_jobs_sharing_nodes_and_base_port_get_disjoint_ports(tmp_path: Path, jobs: None) -> None:
    ports = hold(tmp_path, NAMES[:2], "job-id")
    assert len(set(ports)) == 4, ports  # all four held at once, on one address
    release(tmp_path, NAMES[:2])


def test_a_random_block_comes_from_the_secret_the_job_keeps_private(tmp_path: Path, jobs: None) -> None:
    name = NAMES[2]
    ports = hold(tmp_path, (name,), "random")
    state = SlurmState.named(name)
    ran = int(job_id(name) or 0)
    blocks = PORT_SPAN // 2
    secret = int(state.secret.read_text())
    assert stat.S_IMODE(state.secret.stat().st_mode) == 0o600
    own = (ran + secret) % blocks
    # the secret's block, or (when another program of this host listens on one of its ports: this host runs
    # Kubernetes, a registry...) the next one free of them
    block = next(b for b in ((own + step) % blocks for step in range(blocks))
                 if not any(host_ports.in_use(p) for p in (2222 + b * 2, 2223 + b * 2) if p not in ports))
    assert sorted(ports) == [2222 + block * 2, 2223 + block * 2], (ports, ran)
    assert block != ran % blocks or secret % blocks == 0  # not the block its public job id gives
    release(tmp_path, (name,))


def test_a_block_with_a_port_in_use_on_the_node_gives_way_to_the_next_free_one(tmp_path: Path, jobs: None) -> None:
    """Five blocks of two ports from 65526; this test listens on one port of each but the last: whatever block
    the secret gives, the job takes the last (a task binding a port in use would fail as a crash)."""
    with ExitStack() as stack:
        for port in (65526, 65529, 65530, 65533):
            listener = stack.enter_context(socket.socket())
            listener.bind(("127.0.0.1", port))
            listener.listen()
        ports = hold(tmp_path, NAMES[3:], "random", base=65526)
        assert sorted(ports) == [65534, 65535]
    release(tmp_path, NAMES[3:])
