"""Safety property, on every backend: one task's stacks, and one command's output read for them, are at most
``MAX_STACK_BYTES`` (``launcher.protocol.stacks_signal.capped``, its one home), however much the program or the
reader writes.

Each backend is driven at its own reading point, with a source that writes three times the cap:

- local: py-spy run as a process here (``read_local_stacks``, a stand-in py-spy that never stops writing);
- compose: ``docker exec`` in the task's container (``read_stacks_in``, a stand-in container);
- Slurm: its only way, a dump the program writes on ``STACKS_SIGNAL`` into its output, kept by the shared
  supervisor (a scripted runtime stands in for srun's log);
- Kubernetes: the task's stack endpoint asked by ``KubernetesRuntime`` (the fake API server, the worker's own
  server), and ``debug``'s py-spy through ``pods/exec``, which stops reading at the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from fakes.kubernetes_api import FakeKubernetes
from fakes.scripted_runtime import ScriptedRuntime
from helpers.k8s_fake import backend_for, fake_fixture, settled  # noqa: F401
from helpers.k8s_specs import dry_run_for
from launcher import api
from launcher.backends import pyspy
from launcher.backends.compose.docker_exec import read_stacks_in
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.plan.targets import BackendKind
from launcher.protocol.events import MANUAL_TOKEN
from launcher.protocol.stacks_signal import MAX_STACK_BYTES
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning
from launcher.worker.stack_server import serve_stacks

FRAME = '  File "/x/train.py", line 1 in step\n'
HUGE = FRAME * (3 * MAX_STACK_BYTES // len(FRAME))


def read_local(tmp_path: Path, request: pytest.FixtureRequest) -> list[str | None]:
    endless = tmp_path / "py-spy"
    endless.write_text(f"#!/bin/sh\nhead -c {3 * MAX_STACK_BYTES} /dev/zero | tr '\\0' x\n")
    endless.chmod(0o755)
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(pyspy, "pyspy_binary", lambda: str(endless))
    return [pyspy.read_local_stacks([1, 2])[0]]


def read_compose(tmp_path: Path, request: pytest.FixtureRequest) -> list[str | None]:
    class Container:
        def exec_run(self, command: list[str], **_: Any) -> tuple[int, tuple[bytes, bytes]]:
            return 0, ((b"1\n7\n" if command == ["ls", "/proc"] else HUGE.encode()), b"")

    return [read_stacks_in(Container())[0]]


def read_slurm(tmp_path: Path, request: pytest.FixtureRequest) -> list[str | None]:
    lead = "job-chief-0"
    announced = [f'TFCLUSTER_EVENT/{MANUAL_TOKEN} {{"event":"stacks_on_signal","task":"{lead}","time":1,"signal":"SIGUSR1"}}',
                 f'TFCLUSTER_EVENT/{MANUAL_TOKEN} {{"event":"step","task":"{lead}","time":1,"step":1}}']
    dump = ["Current thread 0x00007f0000000003 (most recent call first):", *HUGE.splitlines()]
    runtime = ScriptedRuntime({lead: [None, 0]}, output={lead: announced}, stacks={lead: dump})
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {"replicas": 1}},
                                       "stall": {"timeout_seconds": 1}}))
    Supervisor(plan, runtime, keep_stacks=partial(write_stacks, tmp_path), tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, stack_gap=0.01)).run()
    return [(tmp_path / "stall-1" / f"{lead}.txt").read_text().rstrip("\n")]


def read_k8s(tmp_path: Path, request: pytest.FixtureRequest) -> list[str | None]:
    fake: FakeKubernetes = request.getfixturevalue("fake")
    fake.job_controller = True
    dry_run = dry_run_for({"name": "caps", "roles": {"worker": {"replicas": 1}}})
    backend = backend_for(fake)
    apply.submit(backend.api, dry_run, "default")
    server = serve_stacks(dry_run.plan.event_token, 0, dump=lambda: HUGE, host="127.0.0.1")
    assert server is not None
    try:
        runtime = KubernetesRuntime(backend.api, dry_run.plan, "default", clock=lambda: fake.now,
                                    stacks_port=server.server_address[1], in_cluster=True, objects=settled(fake))
        worker = dry_run.plan.tasks[0]
        runtime.start(worker)
        endpoint = runtime.read_stacks(worker)
        runtime.close()
    finally:
        server.shutdown()
        server.server_close()
    fake.pod_exec["caps-worker-0"] = lambda command: (0, "1\n" if "ls" in command else HUGE, "")
    return [endpoint, *backend.stacks("caps").values()]  # debug's exec: past the cap it reads no further: None


READERS: dict[BackendKind, Callable[[Path, pytest.FixtureRequest], list[str | None]]] = {
    BackendKind.LOCAL: read_local,
    BackendKind.COMPOSE: read_compose,
    BackendKind.SLURM: read_slurm,
    BackendKind.K8S: read_k8s,
}


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda kind: kind.value)
def test_one_tasks_stacks_are_capped(kind: BackendKind, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    readings = READERS[kind](tmp_path, request)
    assert readings[0] is not None and len(readings[0].encode()) > MAX_STACK_BYTES // 2  # read, up to the cap
    assert all(reading is None or len(reading.encode()) <= MAX_STACK_BYTES for reading in readings), \
        [len(reading) for reading in readings if reading]
