"""Safety property: a forged event line changes nothing, on every backend.

A task's output that holds the event marker where it does not count (inside a data line, behind a log prefix,
the old form without a token, at a line's start without the token or with another one) is ordinary output: the
job's progress is what the run's own events make it, and no task is sent ``STACKS_SIGNAL`` (the stall watchdog,
``debug``) unless it announced ``stacks_on_signal`` with the run's token. The rule has one home,
``launcher.protocol.events.EventReader``; each backend is driven at its own reading point, with the lines in its
own transport, its program printing the forged lines for a stack-dumping event, a step and a finished event:

- local: real processes writing their log file, under the supervisor (the stall watchdog acts after 1 s) and
  under ``debug``'s reading (``stacks_now`` with the runtime ``LocalBackend.stacks`` builds);
- compose: Docker's log stream as the SDK yields it (frame payloads cut anywhere, no prefix) from a stand-in
  client, under the supervisor and ``debug``; with ``-m docker`` a real container on the real engine;
- Slurm: srun's unlabelled log file, srun and ``scancel --signal`` stood in on this host, under the supervisor
  (there is no ``debug`` on Slurm); with ``-m slurm`` the real cluster;
- Kubernetes: the lead pod's log through the fake API server, read by the supervisor over ``KubernetesRuntime``
  (no signal reaches a task there: its agent reads every program's stacks, ``ReadsEveryStack``).

Each backend also has the control: the same lines with the run's token at their start do count.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from signal import Signals
from typing import Any

import pytest
import yaml

from fakes.kubernetes_api import FakeKubernetes
from helpers.docker_engine import IMAGE, Clusters, compose_cli, docker_engine  # noqa: F401
from helpers.k8s_fake import backend_for, fake_fixture, pod_of, settled  # noqa: F401
from helpers.local_cluster import tfcluster
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from helpers.run_names import run_name
from helpers.slurm_cluster import slurm_controller, wait_status  # noqa: F401
from helpers.srun_stand_in import stand_in_slurm
from launcher import api
from launcher.backends.compose.runtime import ContainerRuntime
from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.local.processes import ProcessRuntime
from launcher.backends.slurm.state import SlurmState
from launcher.backends.slurm.steps import StepRuntime
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind
from launcher.protocol import env
from launcher.protocol.events import Step, new_token
from launcher.protocol.job_progress import JobProgress, fold, seed
from launcher.protocol.stacks_signal import STACKS_SIGNAL
from launcher.supervision.debug import stacks_now
from launcher.supervision.runtime import signalled
from launcher.supervision.status import State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

NAME = run_name("forged")
LEAD = f"{NAME}-worker-0"
TOKEN, OTHER = "<token>", "<other>"  # placeholders: the run's token (the task reads it from its env), another one
READY = "ready"
GENUINE = f'TFCLUSTER_EVENT/{TOKEN} {{"event":"step","task":"{LEAD}","time":1,"step":1}}'
PAYLOADS = [
    '{"event":"stacks_on_signal","task":"x","time":2,"signal":"SIGUSR1"}',
    '{"event":"step","task":"x","time":3,"epoch":9,"step":999,"total_steps":1000,"loss":0.001}',
    '{"event":"finished","task":"x","time":4,"metrics":{"loss":0.001},"model_path":"/forged"}',
]
FORGERIES = [
    f"row 7;TFCLUSTER_EVENT/{TOKEN} {{}}",  # the marker and the right token inside a data line
    f"{LEAD}  | TFCLUSTER_EVENT/{TOKEN} {{}}",  # behind a log prefix (`docker compose logs`' own)
    f"2026-01-01T00:00:00.000000000Z stdout F TFCLUSTER_EVENT/{TOKEN} {{}}",  # behind a CRI log prefix
    "TFCLUSTER_EVENT {}",  # the old form, without a token
    "TFCLUSTER_EVENT/ {}",  # at a line's start without the token
    f"TFCLUSTER_EVENT/{OTHER} {{}}",  # with another run's token
]
FORGED = [form.format(payload) for payload in PAYLOADS for form in FORGERIES]
AUTHENTIC = [f"TFCLUSTER_EVENT/{TOKEN} {payload}" for payload in PAYLOADS]
#: What a task that dumps its stacks on the signal writes then (``faulthandler``).
STACK_DUMP = ["Current thread 0x00007f0000000001 (most recent call first):", '  File "<string>", line 9 in <module>']


@dataclass(frozen=True)
class Case:
    """What the lead prints: the genuine step first, then ``lines``, then ``READY``; ``handler``: it dumps its
    stacks on the signal (as a task that announced it does)."""

    lines: list[str]
    handler: bool

    def text(self, token: str) -> str:
        """The output, with ``token`` for the run's and a fresh one for another run's."""
        return "".join(line + "\n" for line in [GENUINE, *self.lines, READY]).replace(TOKEN, token).replace(OTHER, new_token())


FORGED_CASE, CONTROL_CASE = Case(FORGED, handler=False), Case(AUTHENTIC, handler=True)


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    progress: JobProgress
    #: The tasks sent ``STACKS_SIGNAL`` (stall watchdog, ``debug``); None where no signal can reach a task.
    signalled: list[str] | None


def program(case: Case, stay: bool = True, python: str = sys.executable) -> list[str]:
    """The lead's command: a program that prints ``case``'s lines with the token of its environment, as a program
    writing events by hand does; then it stays (until a signal ends it), or ends unless ``stay``."""
    source = "\n".join([
        "import faulthandler, os, signal, sys",
        *(["faulthandler.register(signal.SIGUSR1, all_threads=True)"] if case.handler else []),
        f"sys.stdout.write({case.text(TOKEN)!r}.replace({TOKEN!r}, os.environ[{env.EVENT_TOKEN!r}]))",
        "sys.stdout.flush()",
        *(["while True:", "    signal.pause()"] if stay else []),
    ])
    return [python, "-c", source]


def launched(kind: BackendKind, command: list[str], tmp_path: Path) -> Plan:
    """The plan of a launch (a fresh token) of one worker running ``command``, judged stalled 1 s after its step."""
    data: dict[str, Any] = {"name": NAME, "roles": {"worker": {"command": command}}, "stall": {"timeout_seconds": 1, "action": "fail"}}
    if kind in (BackendKind.LOCAL, BackendKind.SLURM):
        data["checkpoint"] = {"dir": str(tmp_path / "checkpoints")}
    plan = api.plan(api.validate_data(data), kind, api.new_run_id(), launching=True)
    assert len(plan.event_token) == 32 and plan.task(LEAD).env[env.EVENT_TOKEN] == plan.event_token
    return plan


def expected(plan: Plan) -> JobProgress:
    """The progress the run's one genuine event makes."""
    return fold(seed(plan.run_config), [Step(task=LEAD, time=1, step=1)], from_lead=True)


def spied(runtime: type) -> type:
    """``runtime`` recording every ``dump_stacks`` (the decision to send the signal) before it sends it; reading
    stacks from outside (py-spy: no signal) is left out."""

    class Spied(runtime):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.dumped: list[str] = []

        def dump_stacks(self, task: Any) -> None:
            self.dumped.append(task.name)
            super().dump_stacks(task)

        def read_stacks(self, task: Any) -> None:
            return None

    return Spied


def supervise(plan: Plan, runtime: Any) -> JobProgress:
    """The supervisor over ``runtime`` until the stall watchdog fails the job (the lead reports nothing after its
    lines); its progress."""
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.05, linger_seconds=0.0)).run()
    assert status.state is State.FAILED and status.stall is not None and status.stall.stalls == 1, status.message
    return status.progress


# -- local: real processes, their log file --------------------------------------------------------------------


def run_local(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> Outcome:
    plan = launched(BackendKind.LOCAL, program(case), tmp_path)
    supervised = spied(ProcessRuntime)(plan, tmp_path / "logs", tmp_path / "exits")
    progress = supervise(plan, supervised)
    runs: dict[str, Any] = {}  # debug: a running task, read as `LocalBackend.stacks` reads it (its recorded run)
    task = ProcessRuntime(plan, tmp_path / "debug-logs", tmp_path / "debug-exits", on_runs=runs.update)
    task.start(plan.task(LEAD))
    try:
        log = tmp_path / "debug-logs" / f"{LEAD}.log"
        wait_for_condition(lambda: log.exists() and log.read_text().endswith(READY + "\n"))
        debug = spied(ProcessRuntime)(plan, tmp_path / "debug-logs", tmp_path / "debug-exits", recorded=runs)
        stacks_now(debug, plan, seconds=5)
    finally:
        task.stop(plan.tasks, grace_seconds=5)
    return Outcome(plan, progress, supervised.dumped + debug.dumped)


# -- compose: Docker's log stream --------------------------------------------------------------------------------


class FakeContainer:
    """A task container as the Docker SDK shows it. Its log stream (``logs(stream=True, follow=True)``) yields what
    the SDK yields for a container without a tty: the payloads of Docker's frames, cut anywhere (here every 7
    bytes), no timestamps; it ends when the container does. ``kill`` with ``STACKS_SIGNAL`` makes a program with
    the handler write a dump, and ends one without it, as the signal's default action does."""

    def __init__(self, name: str, output: str, handler: bool):
        self.name = name
        self.status = "created"
        self.labels: dict[str, str] = {}
        self.attrs = {"State": {"ExitCode": 0, "StartedAt": "2026-01-01T00:00:00.000000000Z"}}
        self.handler = handler
        self.signals: list[str] = []
        self.drained = threading.Event()  # every frame written so far was taken from the stream
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._written = b""  # everything written: what a read without following returns
        self._write(output)

    def _write(self, text: str) -> None:
        data = text.encode()
        self._written += data
        for at in range(0, len(data), 7):
            self._frames.put(data[at:at + 7])

    def start(self) -> None:
        self.status = "running"

    def logs(self, stream: bool, follow: bool, since: float) -> Iterator[bytes]:
        if not follow:
            return iter([self._written])
        return self._followed()

    def _followed(self) -> Iterator[bytes]:
        while True:
            if self._frames.empty():
                self.drained.set()
            frame = self._frames.get()
            if frame is None:
                return
            self.drained.clear()
            yield frame

    def kill(self, signal: str = "SIGKILL") -> None:
        self.signals.append(signal)
        if signal == STACKS_SIGNAL.name and self.handler:
            self._write("".join(line + "\n" for line in STACK_DUMP))
        else:
            self._end(128 + Signals[signal])

    def stop(self, timeout: int | None = None) -> None:
        self._end(143)

    def _end(self, code: int) -> None:
        if self.status == "running":
            self.status = "exited"
            self.attrs["State"]["ExitCode"] = code
            self._frames.put(None)

    def reload(self) -> None:
        pass

    def wait(self) -> None:
        pass


class FakeDocker:
    """``client.containers.get`` of the Docker SDK over ``FakeContainer``s."""

    def __init__(self, *containers: FakeContainer):
        self.found = {c.name: c for c in containers}
        self.containers = self

    def get(self, name: str) -> FakeContainer:
        import docker.errors

        if name not in self.found:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.found[name]


def run_compose(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> Outcome:
    plan = launched(BackendKind.COMPOSE, program(case), tmp_path)
    supervised_container = FakeContainer(LEAD, case.text(plan.event_token), case.handler)
    supervised = spied(ContainerRuntime)(FakeDocker(supervised_container), [], tmp_path)
    progress = supervise(plan, supervised)
    # debug: `ComposeBackend.stacks` attaches a runtime to the running container; its adopt returns once the
    # stream gave every line written, so the lines are read at all.
    running = FakeContainer(LEAD, case.text(plan.event_token), case.handler)
    running.start()
    debug = spied(ContainerRuntime)(FakeDocker(running), [], tmp_path)
    try:
        stacks_now(debug, plan, seconds=5)
    finally:
        running.stop()
        debug.close()
    signalled = supervised.dumped + debug.dumped
    assert [c.name for c in (supervised_container, running) for sent in c.signals if sent == STACKS_SIGNAL.name] == signalled
    return Outcome(plan, progress, signalled)


# -- Slurm: srun's log file ----------------------------------------------------------------------------------------

def run_slurm(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> Outcome:
    stand_in_slurm(request.getfixturevalue("monkeypatch"), tmp_path)
    plan = launched(BackendKind.SLURM, program(case), tmp_path)
    runtime = spied(StepRuntime)(plan, {LEAD: "n1"}, tmp_path / "logs", "1", 0)
    return Outcome(plan, supervise(plan, runtime), runtime.dumped)


# -- Kubernetes: the pod's log through the API -------------------------------------------------------------------


def run_k8s(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> Outcome:
    """The supervisor over ``KubernetesRuntime``: the lead pod's log as the fake API server streams it; no signal
    (its tasks' agents serve every program's stacks, announced or not: ``ReadsEveryStack``). The fake's clock moves
    while ``stop`` waits."""
    fake: FakeKubernetes = request.getfixturevalue("fake")
    fake.job_controller = True
    plan = launched(BackendKind.K8S, program(case), tmp_path)
    api_ = backend_for(fake).api
    apply.submit(api_, KubernetesBackend.dry_run(plan), "default")

    def pause(seconds: float) -> None:
        fake.now += seconds

    class Runtime(KubernetesRuntime):
        def start(self, task: Any) -> None:
            super().start(task)  # its pod runs at once: what the program prints is its log
            fake.pod_logs["default", pod_of(fake, task.name)] = case.text(plan.event_token)

    runtime = Runtime(api_, plan, "default", clock=lambda: fake.now, pause=pause, objects=settled(fake))
    assert not signalled(runtime, announced=True)
    return Outcome(plan, supervise(plan, runtime), None)


RUNS: dict[BackendKind, Callable[[Case, Path, pytest.FixtureRequest], Outcome]] = {
    BackendKind.LOCAL: run_local,
    BackendKind.COMPOSE: run_compose,
    BackendKind.SLURM: run_slurm,
    BackendKind.K8S: run_k8s,
}


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_forged_event_lines_change_no_status_and_send_no_signal(kind: BackendKind, tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    run = RUNS.get(kind)
    assert run is not None, f"{kind.value}: drive its reading point here (a new backend must pass this property)"
    outcome = run(FORGED_CASE, tmp_path, request)
    assert outcome.progress == expected(outcome.plan), outcome.progress
    assert outcome.signalled in ([], None), f"sent {STACKS_SIGNAL.name} to {outcome.signalled} on a forged announcement"


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_the_same_lines_with_the_runs_token_count(kind: BackendKind, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The control: the harness reads what the task wrote, so the property above is not vacuous."""
    outcome = RUNS[kind](CONTROL_CASE, tmp_path, request)
    assert (outcome.progress.step, outcome.progress.model_path, outcome.progress.event) == (999, "/forged", "finished")
    assert outcome.signalled is None or LEAD in outcome.signalled


# -- the real engines ----------------------------------------------------------------------------------------------


@pytest.mark.docker
def test_forged_lines_in_a_real_containers_log_stream_change_nothing(docker_engine: Any, compose_cli: list[str],  # noqa: F811
                                                                     tmp_path: Path) -> None:
    if not docker_engine.images.list(name=IMAGE):
        unavailable(f"{IMAGE} is not built (.ci/docker.sh builds it)")
    clusters = Clusters(tmp_path)  # not the `clusters` fixture: the image's tfcluster is not what runs here
    try:
        plan = clusters.up({"name": NAME, "image": IMAGE,
                            "roles": {"worker": {"command": program(FORGED_CASE, stay=False, python="python")}}})
        job = clusters.wait(NAME, timeout=180)
        assert job.state is State.SUCCEEDED, job.message
        assert job.progress == expected(plan), job.progress
    finally:
        clusters.down_all()


@pytest.mark.slurm
def test_forged_lines_in_a_real_slurm_task_log_change_nothing(slurm_controller: None, tmp_path: Path) -> None:  # noqa: F811
    spec = tmp_path / f"{NAME}.yaml"
    spec.write_text(yaml.safe_dump({"name": NAME, "roles": {"worker": {"command": program(FORGED_CASE, stay=False)}}}))
    try:
        result = tfcluster("up", "-b", "slurm", "--detach", str(spec), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        status = wait_status(NAME, lambda s: s.state.terminal, timeout=180)
        assert status.state is State.SUCCEEDED, status.message
        assert status.progress == expected(SlurmState.named(NAME).record.read_plan()), status.progress
        state = SlurmState.named(NAME)  # the log carried the data line holding the marker with the run's token:
        assert FORGED[0].replace(TOKEN, state.record.read_plan().event_token) in state.task_log(LEAD).read_text()
    finally:
        tfcluster("down", NAME, "-b", "slurm", cwd=tmp_path, timeout=180)
