"""Safety property: nothing a task prints makes the supervisor hold an unbounded line or batch, on every backend.

A task prints a line, then one endless line (``ENDLESS_BYTES`` without a newline), and fails. Whatever its
transport, each line the backend's runtime gives the supervisor (``Runtime.output``) is at most
``MAX_LINE_BYTES`` and ``CUT_MARK`` (the one splitter, ``launcher.backends.lines.LineSplitter``), the line before
it arrives whole, and the job's message, which names the task's last error, stays within ``LAST_ERROR_CHARS``.
A task that prints many short lines (``MANY`` lines, all between two reads) hands them over a bounded batch at a time
(``BATCH_LINES`` lines of about ``BATCH_BYTES`` characters: ``LineReader`` and ``LineQueue``), every one of them
in order, none lost (a reader thread waits while its queue is full), the last one naming the job's failure.
Each backend is driven at its own reading point, as ``test_safety_forged_events`` drives it:

- local: a real process writing its log file (``ProcessRuntime``);
- compose: Docker's log stream as the SDK yields it (frame payloads of 4 KiB) from a stand-in client;
- Slurm: srun's log file, srun stood in on this host (``helpers.srun_stand_in``);
- Kubernetes: the pod's log through the fake API server (``KubernetesRuntime``).
"""

from __future__ import annotations

import sys
import time
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
from launcher.backends.lines import BATCH_BYTES, BATCH_LINES, CUT_MARK, MAX_LINE_BYTES, READ_BYTES
from launcher.backends.local.processes import ProcessRuntime
from launcher.backends.slurm.steps import StepRuntime
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.task_runs import LAST_ERROR_CHARS
from launcher.supervision.tuning import Tuning

NAME = "endless"
LEAD = f"{NAME}-worker-0"
#: The endless line's length: far past the bound, small enough for a quick test.
ENDLESS_BYTES = 2 * 1024 * 1024
BEFORE = "the line before"
OUTPUT = (BEFORE + "\n" + "E" * ENDLESS_BYTES).encode()
#: The Python expression of what the task prints (``OUTPUT``): too long for an argument as it is.
OUTPUT_CODE = f"{BEFORE + chr(10)!r} + 'E' * {ENDLESS_BYTES}"
#: The most one line the supervisor is given may hold.
LINE_BOUND = MAX_LINE_BYTES + len(CUT_MARK.encode())
#: Short lines, three batches' worth and one more, the last one the task's error.
MANY = [f"line {n:06d}" for n in range(3 * BATCH_LINES + 1)]
MANY_OUTPUT = "\n".join(MANY).encode()
MANY_CODE = f"chr(10).join(f'line {{n:06d}}' for n in range({len(MANY)}))"
#: The most characters one batch may hold: the bound, one read chunk's lines and one held line past it.
BATCH_BOUND = BATCH_BYTES + READ_BYTES + 2 * LINE_BOUND


#: What a task prints: as its Python expression, and the bytes it makes.
Printed = tuple[str, bytes]


def program(printed: Printed) -> list[str]:
    """The task: what ``printed`` says to its stdout, then it fails."""
    return [sys.executable, "-c", f"import sys; sys.stdout.write({printed[0]}); sys.stdout.flush(); sys.exit(1)"]


def launched(kind: BackendKind, tmp_path: Path, printed: Printed) -> Plan:
    data: dict[str, Any] = {"name": NAME, "roles": {"worker": {"command": program(printed)}},
                            "restart": {"max_restarts": 0}}
    if kind in (BackendKind.LOCAL, BackendKind.SLURM):
        data["checkpoint"] = {"dir": str(tmp_path / "checkpoints")}
    return api.plan(api.validate_data(data), kind, api.new_run_id(), launching=True)


def recording(runtime: type) -> type:
    """``runtime`` keeping every batch its ``output`` gives the supervisor; its first read comes once the run
    ended, so that all the run's output waits between two reads."""

    class Recording(runtime):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.batches: list[list[str]] = []

        def output(self, task: Any) -> list[str]:
            while not self.batches and super().poll(task) is None:
                time.sleep(0.01)
            lines: list[str] = super().output(task)
            self.batches.append(lines)
            return lines

    return Recording


Run = tuple[JobStatus, list[list[str]]]


def supervise(plan: Plan, runtime: Any) -> Run:
    return Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.05, linger_seconds=0.0)).run(), runtime.batches


def run_local(tmp_path: Path, request: pytest.FixtureRequest, printed: Printed) -> Run:
    plan = launched(BackendKind.LOCAL, tmp_path, printed)
    return supervise(plan, recording(ProcessRuntime)(plan, tmp_path / "logs", tmp_path / "exits"))


class EndingContainer:
    """A task container as the Docker SDK shows it, whose program wrote ``output`` and exited 1 as it started: its
    log stream yields the payloads of Docker's frames (4 KiB each)."""

    def __init__(self, name: str, output: bytes):
        self.name = name
        self.output = output
        self.status = "created"
        self.labels: dict[str, str] = {}
        self.attrs = {"State": {"ExitCode": 0, "StartedAt": "2026-01-01T00:00:00.000000000Z"}}

    def start(self) -> None:
        self.status, self.attrs["State"]["ExitCode"] = "exited", 1

    def logs(self, stream: bool, follow: bool, since: float) -> Iterator[bytes]:
        for at in range(0, len(self.output), 4096):
            yield self.output[at:at + 4096]

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


def run_compose(tmp_path: Path, request: pytest.FixtureRequest, printed: Printed) -> Run:
    plan = launched(BackendKind.COMPOSE, tmp_path, printed)
    return supervise(plan, recording(ContainerRuntime)(StandInDocker(EndingContainer(LEAD, printed[1])), [], tmp_path))


def run_slurm(tmp_path: Path, request: pytest.FixtureRequest, printed: Printed) -> Run:
    stand_in_slurm(request.getfixturevalue("monkeypatch"), tmp_path)
    plan = launched(BackendKind.SLURM, tmp_path, printed)
    return supervise(plan, recording(StepRuntime)(plan, {LEAD: "n1"}, tmp_path / "logs", "1", 0))


def run_k8s(tmp_path: Path, request: pytest.FixtureRequest, printed: Printed) -> Run:
    """The pod's log as the fake API server streams it; the pod has ended (exit 1) once its log was written."""
    fake: FakeKubernetes = request.getfixturevalue("fake")
    fake.job_controller = True
    plan = launched(BackendKind.K8S, tmp_path, printed)
    api_ = backend_for(fake).api
    apply.submit(api_, KubernetesBackend.dry_run(plan), "default")

    class Runtime(recording(KubernetesRuntime)):  # type: ignore[misc]
        def start(self, task: Any) -> None:
            super().start(task)
            pod = pod_of(fake, task.name)
            fake.pod_logs["default", pod] = printed[1].decode()
            fake.finish_pod(pod, 1)

    def pause(seconds: float) -> None:
        fake.now += seconds

    return supervise(plan, Runtime(api_, plan, "default", clock=lambda: fake.now, pause=pause))


RUNS: dict[BackendKind, Callable[[Path, pytest.FixtureRequest, Printed], Run]] = {
    BackendKind.LOCAL: run_local,
    BackendKind.COMPOSE: run_compose,
    BackendKind.SLURM: run_slurm,
    BackendKind.K8S: run_k8s,
}


def driven(kind: BackendKind, tmp_path: Path, request: pytest.FixtureRequest, printed: Printed) -> Run:
    """``printed`` through ``kind``'s reading point; every backend must have one here."""
    run = RUNS.get(kind)
    assert run is not None, f"{kind.value}: drive its reading point here (a new backend must pass this property)"
    return run(tmp_path, request, printed)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_an_endless_line_reaches_the_supervisor_bounded(kind: BackendKind, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    job, batches = driven(kind, tmp_path, request, (OUTPUT_CODE, OUTPUT))
    given = [line for batch in batches for line in batch]
    assert BEFORE in given, given[:3]
    assert max(len(line.encode()) for line in given) <= LINE_BOUND, max(len(line.encode()) for line in given)
    assert any(line.startswith("EEEE") and line.endswith(CUT_MARK) for line in given)
    assert job.state is State.FAILED and "last error: EEEE" in job.message, job.message[:300]
    assert len(job.message) <= LAST_ERROR_CHARS + 200, len(job.message)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_many_short_lines_reach_the_supervisor_a_bounded_batch_at_a_time(kind: BackendKind, tmp_path: Path,
                                                                         request: pytest.FixtureRequest) -> None:
    job, batches = driven(kind, tmp_path, request, (MANY_CODE, MANY_OUTPUT))
    assert max(len(batch) for batch in batches) <= BATCH_LINES, [len(batch) for batch in batches]
    assert max(sum(len(line) for line in batch) for batch in batches) <= BATCH_BOUND
    given = [line for batch in batches for line in batch]
    assert given[:len(MANY)] == MANY, (len(given), given[-3:])  # every line, in order (then the runtime's notes)
    assert job.state is State.FAILED and f"last error: {MANY[-1]}" in job.message, job.message[:300]
