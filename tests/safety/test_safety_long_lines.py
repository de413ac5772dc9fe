"""Safety property: nothing a task prints makes the supervisor hold an unbounded line, on every backend.

A task prints a line, then one endless line (``ENDLESS_BYTES`` without a newline), and fails. Whatever its
transport, each line the backend's runtime gives the supervisor (``Runtime.output``) is at most
``MAX_LINE_BYTES`` and ``CUT_MARK`` (the one splitter, ``launcher.backends.lines.LineSplitter``), the line before
it arrives whole, and the job's message, which names the task's last error, stays within ``LAST_ERROR_CHARS``.
Each backend is driven at its own reading point, as ``test_safety_forged_events`` drives it:

- local: a real process writing its log file (``ProcessRuntime``);
- compose: Docker's log stream as the SDK yields it (frame payloads of 4 KiB) from a stand-in client;
- Slurm: srun's log file, srun stood in on this host (``helpers.srun_stand_in``);
- Kubernetes: the pod's log through the fake API server (``KubernetesRuntime``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, fake_fixture, pod_of  # noqa: F401
from helpers.srun_stand_in import stand_in_slurm
from launcher import api
from launcher.backends.compose.runtime import ContainerRuntime
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.lines import CUT_MARK, MAX_LINE_BYTES
from launcher.backends.local.processes import ProcessRuntime
from launcher.backends.slurm.steps import StepRuntime
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import LAST_ERROR_CHARS, Supervisor

NAME = "endless"
LEAD = f"{NAME}-worker-0"
#: The endless line's length: far past the bound, small enough for a quick test.
ENDLESS_BYTES = 2 * 1024 * 1024
BEFORE = "the line before"
OUTPUT = (BEFORE + "\n" + "E" * ENDLESS_BYTES).encode()
#: The most one line the supervisor is given may hold.
LINE_BOUND = MAX_LINE_BYTES + len(CUT_MARK.encode())


def program() -> list[str]:
    """The task: ``OUTPUT`` to its stdout, then it fails."""
    write = f"sys.stdout.write({BEFORE + chr(10)!r} + 'E' * {ENDLESS_BYTES})"
    return [sys.executable, "-c", f"import sys; {write}; sys.stdout.flush(); sys.exit(1)"]


def launched(kind: BackendKind, tmp_path: Path) -> Plan:
    data: dict[str, Any] = {"name": NAME, "roles": {"worker": {"command": program()}}, "restart": {"max_restarts": 0}}
    if kind in (BackendKind.LOCAL, BackendKind.SLURM):
        data["checkpoint"] = {"dir": str(tmp_path / "checkpoints")}
    return api.plan(api.validate_data(data), kind, api.new_run_id(), launching=True)


def recording(runtime: type) -> type:
    """``runtime`` keeping every line its ``output`` gives the supervisor."""

    class Recording(runtime):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.given: list[str] = []

        def output(self, task: Any) -> list[str]:
            lines: list[str] = super().output(task)
            self.given += lines
            return lines

    return Recording


def supervise(plan: Plan, runtime: Any) -> tuple[JobStatus, list[str]]:
    return Supervisor(plan, runtime, poll_seconds=0.05, grace_seconds=0.0).run(), runtime.given


def run_local(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[JobStatus, list[str]]:
    plan = launched(BackendKind.LOCAL, tmp_path)
    return supervise(plan, recording(ProcessRuntime)(plan, tmp_path / "logs", tmp_path / "exits"))


class EndingContainer:
    """A task container as the Docker SDK shows it, whose program writes ``OUTPUT`` and exits 1: its log stream
    yields the payloads of Docker's frames (4 KiB each), and the container has ended once the stream has."""

    def __init__(self, name: str):
        self.name = name
        self.status = "created"
        self.labels: dict[str, str] = {}
        self.attrs = {"State": {"ExitCode": 0, "StartedAt": "2026-01-01T00:00:00.000000000Z"}}

    def start(self) -> None:
        self.status = "running"

    def logs(self, stream: bool, follow: bool, since: float) -> Iterator[bytes]:
        for at in range(0, len(OUTPUT), 4096):
            yield OUTPUT[at:at + 4096]
        self.status, self.attrs["State"]["ExitCode"] = "exited", 1

    def reload(self) -> None:
        pass


class StandInDocker:
    """``client.containers.get`` of the Docker SDK over one ``EndingContainer``."""

    def __init__(self, container: EndingContainer):
        self.container = container
        self.containers = self

    def get(self, name: str) -> EndingContainer:
        import docker.errors

        if name != self.container.name:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.container


def run_compose(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[JobStatus, list[str]]:
    plan = launched(BackendKind.COMPOSE, tmp_path)
    return supervise(plan, recording(ContainerRuntime)(StandInDocker(EndingContainer(LEAD)), [], tmp_path))


def run_slurm(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[JobStatus, list[str]]:
    stand_in_slurm(request.getfixturevalue("monkeypatch"), tmp_path)
    plan = launched(BackendKind.SLURM, tmp_path)
    return supervise(plan, recording(StepRuntime)(plan, {LEAD: "n1"}, tmp_path / "logs", "1", 0))


def run_k8s(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[JobStatus, list[str]]:
    """The pod's log as the fake API server streams it; the pod has ended (exit 1) once its log was written."""
    fake: FakeKubernetes = request.getfixturevalue("fake")
    fake.job_controller = True
    plan = launched(BackendKind.K8S, tmp_path)
    api_ = backend_for(fake).api
    apply.submit(api_, KubernetesBackend.dry_run(plan), "default")

    class Runtime(recording(KubernetesRuntime)):  # type: ignore[misc]
        def start(self, task: Any) -> None:
            super().start(task)
            pod = pod_of(fake, task.name)
            fake.pod_logs["default", pod] = OUTPUT.decode()
            fake.finish_pod(pod, 1)

    def pause(seconds: float) -> None:
        fake.now += seconds

    return supervise(plan, Runtime(api_, plan, "default", clock=lambda: fake.now, pause=pause))


RUNS: dict[BackendKind, Callable[[Path, pytest.FixtureRequest], tuple[JobStatus, list[str]]]] = {
    BackendKind.LOCAL: run_local,
    BackendKind.COMPOSE: run_compose,
    BackendKind.SLURM: run_slurm,
    BackendKind.K8S: run_k8s,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_an_endless_line_reaches_the_supervisor_bounded(kind: BackendKind, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    run = RUNS.get(kind)
    assert run is not None, f"{kind.value}: drive its reading point here (a new backend must pass this property)"
    job, given = run(tmp_path, request)
    assert BEFORE in given, given[:3]
    assert max(len(line.encode()) for line in given) <= LINE_BOUND, max(len(line.encode()) for line in given)
    assert any(line.startswith("EEEE") and line.endswith(CUT_MARK) for line in given)
    assert job.state is State.FAILED and "last error: EEEE" in job.message, job.message[:300]
    assert len(job.message) <= LAST_ERROR_CHARS + 200, len(job.message)
