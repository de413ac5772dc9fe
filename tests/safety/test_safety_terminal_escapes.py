"""Safety property: escapes never reach a terminal, on every backend and every output that shows task or spec text.

A task prints a line carrying OSC 52 (clipboard), OSC 0 (title), ``ESC[2J``, a C1 CSI, NEL, U+2028, DEL and a
carriage return before a forged word; its program's name and command line carry escapes too (py-spy shows
both in a stack dump), and on Kubernetes its termination message carries a line break as well. ``status``
(text and JSON), the live view (``watch``) and ``debug`` of that cluster, on each backend, write no raw ESC,
BEL, C1, DEL, CR or Unicode line separator, no line that the task started, and show the escaped form
(``\\x1b]52;...``) instead. So does ``dry-run`` (text, JSON, plan) of a spec whose values and file name carry
them. ``logs`` is raw by design, as ``kubectl logs`` is (docs/security.md).

Each backend runs its own status and stacks readers against a stand-in: the local backend real processes (a
tiny script, read by the real py-spy); compose and Slurm the shared supervisor over a scripted runtime writing
their state dir, which their ``describe`` reads, and for compose's stacks a Docker client stand-in answering
``docker exec``; Kubernetes the fake API server (the status the shared supervisor published in the run's
ConfigMap, pod logs, ``pods/exec``). A backend added
to ``BackendKind`` fails here until it has a stand-in. The real-engine variants (markers ``docker``, ``slurm``)
run compose on the Docker engine with the worker image as it is (py-spy through ``docker exec``) and Slurm on
its cluster (srun steps); a real Kubernetes cluster is tests/e2e's.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from click.testing import CliRunner, Result

from fakes.kubernetes_api import FakeKubernetes
from fakes.scripted_runtime import ScriptedRuntime
from helpers.docker_engine import IMAGE, compose_cli, docker_engine  # noqa: F401 - fixtures
from helpers.k8s_fake import backend_for
from helpers.k8s_specs import dry_run_for
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from helpers.run_names import run_name
from helpers.slurm_cluster import slurm_controller  # noqa: F401 - a fixture
from launcher import api
from launcher.backends.compose.backend import ComposeBackend
from launcher.backends.interface import BackendOptions
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.cluster_state import ConfigMapStore
from launcher.backends.kubernetes.kubeapi import Kind
from launcher.backends.local.backend import LocalBackend
from launcher.backends.slurm.backend import SlurmBackend
from launcher.backends.slurm.state import SlurmState
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind
from launcher.supervision import harness
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

#: One line of a task's output (lines are split at ``\n``): each control character here drives a terminal or
#: starts a line of its own there (``\r`` overwrites the line from its start, NEL and U+2028 break it).
HOSTILE = "a\x1b]52;c;SGVsbG8=\x07b\x1b]0;pwned\x07c\x1b[2Jd\x9b31me\x85f\u2028g\x7fh\rFORGED"
#: A value that is not a line of output (a spec value, a termination message): a line break too.
HOSTILE_VALUE = HOSTILE + "\nFORGED"
#: What the terminal shows instead: the visible escape.
SHOWN = "\\x1b]52;c;SGVsbG8=\\x07"
#: Raw characters that must never be written: C0 but the output's own line breaks and tabs, DEL, C1, U+2028/9.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
NAME = run_name("esc")
SPEC = {"name": NAME, "roles": {"chief": {}, "worker": {"replicas": 2}}, "restart": {"max_restarts": 0}}


def assert_escaped(output: str, shown: bool = True) -> None:
    """No raw control character, no line a value started, and (``shown``) the escaped form visible."""
    raw = sorted({f"U+{ord(c):04X}" for c in RAW.findall(output)})
    assert raw == [], f"raw control characters {raw} in:\n{output!r}"
    assert re.search(r"^\W*FORGED", output, re.MULTILINE) is None, f"a forged line in:\n{output}"
    if shown:
        assert SHOWN in output, output


def assert_json_escaped(output: str, value: str) -> None:
    """JSON that escapes every control character itself and still holds ``value`` exactly."""
    assert RAW.search(output) is None, repr(output)
    assert value in json.dumps(json.loads(output)), output


def cli(*args: str) -> Result:
    return CliRunner(env={"COLUMNS": "1000"}).invoke(main, list(args))


def record_a_failed_run(state: harness.StateDir, kind: BackendKind) -> None:
    """The shared supervisor (as in a local or compose supervisor process, or a Slurm allocation) over a scripted
    runtime: the lead prints ``HOSTILE`` and exits 1; its statuses written where the backend's ``describe`` reads."""
    plan = api.plan(api.validate_data(SPEC), kind)
    state.create(plan)
    runtime = ScriptedRuntime({f"{NAME}-chief-0": [1]}, output={f"{NAME}-chief-0": [HOSTILE]})
    Supervisor(plan, runtime, on_status=state.record.write_status, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0, fault_pause=0.0)).run()


class StandIn:
    """A cluster ``NAME`` on one backend whose task output carries ``HOSTILE``: ``start`` leaves it running
    (``stacks``: its stacks can be read, and carry escapes), ``finish`` ends it (failed)."""

    stacks = True
    #: ``watch``'s exit code once ``finish`` ended the job.
    outcome = 1

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        self.tmp_path, self.monkeypatch = tmp_path, monkeypatch

    def start(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Ends the job (failed); by default it is over already."""

    def close(self) -> None:
        """Removes what ``start`` left."""


class Local(StandIn):
    """Real processes: a script whose file name carries escapes, and its argument ``HOSTILE``, prints it, blocks on a fifo,
    then prints it again and exits 3; py-spy reads its stacks."""

    def start(self) -> None:
        self.monkeypatch.chdir(self.tmp_path)
        script = self.tmp_path / "task\x1b]0;pwned\x07.py"
        script.write_text(f"import sys\nprint({HOSTILE!r}, flush=True)\nopen(sys.argv[1]).read()\n"
                          f"print({HOSTILE!r}, flush=True)\nsys.exit(3)\n")
        self.fifos = []
        roles: dict[str, Any] = {}
        for role in ("chief", "worker"):
            fifo = self.tmp_path / f"{role}.fifo"
            os.mkfifo(fifo)
            self.fifos.append(fifo)
            roles[role] = {"command": [sys.executable, str(script), str(fifo), HOSTILE]}
        spec = self.tmp_path / "esc.yaml"
        spec.write_text(json.dumps({**SPEC, "roles": roles, "checkpoint": {"dir": str(self.tmp_path / "ck")}}))
        assert (result := cli("up", "--detach", str(spec))).exit_code == 0, result.output

        def printed() -> bool:
            job = LocalBackend().describe(NAME)
            return job is not None and all("FORGED" in task.last_line for task in job.tasks)

        wait_for_condition(printed)

    def finish(self) -> None:
        # every fifo's writer is opened before any is closed: once the chief reads the end of its input and exits 3,
        # the job fails and its workers are stopped, so a worker's fifo opened after that would never find its reader
        writers = [_writer(fifo) for fifo in self.fifos]
        for writer in writers:
            os.close(writer)  # the task reads the end of its input, prints again, exits 3
        wait_for_condition(lambda: LocalBackend().describe(NAME).state.terminal)  # type: ignore[union-attr]

    def close(self) -> None:
        if LocalBackend().describe(NAME) is not None:
            LocalBackend().cancel(NAME)


def _writer(fifo: Path) -> int:
    """The write end of ``fifo`` once its reader has it open (polled, bounded: ENXIO until then)."""
    opened: list[int] = []

    def opens() -> bool:
        try:
            opened.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO, exc
        return bool(opened)

    wait_for_condition(opens)
    return opened[0]


class Container:
    """A running task container as the Docker SDK shows it: ``docker exec`` of ``ls /proc`` and py-spy."""

    def __init__(self, name: str, pyspy: tuple[int, tuple[bytes | None, bytes | None]]):
        self.name, self.pyspy = name, pyspy
        self.status, self.labels = "running", {}
        self.attrs = {"State": {"StartedAt": "2026-01-01T00:00:00.000000000Z", "ExitCode": 0}}

    def logs(self, **options: Any) -> Iterator[bytes]:
        return iter([HOSTILE.encode() + b"\n"])

    def kill(self, **options: Any) -> None:
        pass

    def exec_run(self, command: list[str], **options: Any) -> tuple[int, tuple[bytes | None, bytes | None]]:
        return (0, (b"1\n", None)) if command == ["ls", "/proc"] else self.pyspy


class Containers:
    def __init__(self, running: dict[str, Container]):
        self.running = running

    def get(self, name: str) -> Container:
        if name not in self.running:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.running[name]

    def list(self, **options: Any) -> list[Container]:
        return list(self.running.values())


class DockerClient:
    def __init__(self, running: dict[str, Container]):
        self.containers = Containers(running)


def pyspy_dump(program: str) -> str:
    """What py-spy prints of a Python process running ``program``: its command line and frames, raw."""
    return (f"Process 1: python {program} {HOSTILE}\nPython v3.11.2 (/usr/bin/python3.11)\n\n"
            f"Thread 1 (idle): \"MainThread\"\n    wait ({program}:3)\n    <module> ({program}:9)\n")


class Compose(StandIn):
    """The compose state dir written by the shared supervisor; stacks read through a Docker client stand-in:
    the chief's dump carries escapes, py-spy fails on a worker with an error that does."""

    def start(self) -> None:
        record_a_failed_run(harness.StateDir.of(BackendKind.COMPOSE, NAME), BackendKind.COMPOSE)
        dump = pyspy_dump("/workspace/task\x1b]0;pwned\x07.py").encode()
        client = DockerClient({
            f"{NAME}-chief-0": Container(f"{NAME}-chief-0", (0, (dump, None))),
            f"{NAME}-worker-0": Container(f"{NAME}-worker-0", (1, (None, f"Error: {HOSTILE}\n".encode()))),
        })
        self.monkeypatch.setattr(ComposeBackend, "create", classmethod(lambda cls, options: cls(client)))

    def close(self) -> None:
        harness.StateDir.of(BackendKind.COMPOSE, NAME).remove()


class Slurm(StandIn):
    """The Slurm state dir written by the shared supervisor, as in the allocation; the controller has forgotten
    the job (no ``squeue`` here). Slurm reads no stacks (``debug`` says so in one line)."""

    stacks = False

    def start(self) -> None:
        record_a_failed_run(SlurmState.named(NAME), BackendKind.SLURM)

    def close(self) -> None:
        SlurmState.named(NAME).remove()


class Kubernetes(StandIn):
    """The fake API server: the run applied, each task's Job started (its pod runs), the status the shared supervisor
    published in the run's ConfigMap (``ConfigMapStore``, as the supervisor pod does: the lead printed ``HOSTILE``,
    the run failed); the lead's log carries ``HOSTILE``, worker 0 ended with a termination message carrying
    ``HOSTILE_VALUE``; ``pods/exec`` gives the chief's stacks with escapes, and an error with escapes on worker 1."""

    def start(self) -> None:
        self.fake = FakeKubernetes()
        self.fake.url = self.fake.start()
        backend = backend_for(self.fake)
        dry_run = dry_run_for(SPEC)
        backend.submit(dry_run)
        pods = []
        for task in dry_run.plan.tasks:  # as the supervisor starts them
            backend.api.merge_patch(Kind.JOB, task.name, "default", {"spec": {"suspend": False}})
            pods += self.fake.start_pods(task.name)
        chief, worker0, worker1 = pods
        self.fake.pod_logs[("default", chief)] = HOSTILE + "\n"
        self.fake.finish_pod(worker0, 1, message=HOSTILE_VALUE)
        dump = pyspy_dump("/workspace/task\x1b]0;pwned\x07.py")
        self.fake.pod_exec.update({
            chief: lambda command: (0, "1\n", "") if command[-2:] == ["ls", "/proc"] else (0, dump, ""),
            worker1: lambda command: (0, "1\n", "") if command[-2:] == ["ls", "/proc"] else (1, "", f"Error: {HOSTILE}\n"),
        })
        store = ConfigMapStore(backend.api, NAME, "default", in_pod=False)
        record_a_failed_run(harness.StateDir(self.tmp_path / "state", record=store), BackendKind.K8S)
        self.monkeypatch.setattr(KubernetesBackend, "create", classmethod(lambda cls, options: backend_for(self.fake)))

    def close(self) -> None:
        self.fake.stop()


#: A task of the real-engine variants: prints its argument (``HOSTILE``), waits for the file its second argument
#: names (a gate the test opens), prints it again and succeeds (a failure would end with srun's own line last).
#: One line of source: py-spy shows it in the dump.
GATED = ["python", "-c", "import pathlib, sys, time; print(sys.argv[1], flush=True); "
         "any(time.sleep(0.05) for _ in iter(pathlib.Path(sys.argv[2]).exists, True)); print(sys.argv[1], flush=True)"]


class RealCompose(StandIn):
    """The real Docker engine and the worker image as it is (never rebuilt here): containers of ``GATED``, read
    by the image's py-spy through ``docker exec``; the gate is a file the test makes in each container."""

    outcome = 0

    def start(self) -> None:
        self.monkeypatch.chdir(self.tmp_path)
        spec = self.tmp_path / "esc.yaml"
        spec.write_text(json.dumps({**SPEC, "image": IMAGE, "command": [*GATED, HOSTILE, "/tmp/go"]}))
        assert (result := cli("up", "--detach", "-b", "compose", str(spec))).exit_code == 0, result.output
        self.backend = ComposeBackend.create(BackendOptions())

        def printed() -> bool:
            job = self.backend.describe(NAME)
            return job is not None and all("FORGED" in task.last_line for task in job.tasks)

        wait_for_condition(printed, timeout=120)

    def finish(self) -> None:
        for task in (f"{NAME}-chief-0", f"{NAME}-worker-0", f"{NAME}-worker-1"):
            self.backend.client.containers.get(task).exec_run(["touch", "/tmp/go"])
        wait_for_condition(lambda: self.backend.describe(NAME).state.terminal, timeout=120)  # type: ignore[union-attr]

    def close(self) -> None:
        if hasattr(self, "backend"):
            self.backend.cancel(NAME, volumes=True)


class RealSlurm(StandIn):
    """The real Slurm cluster: ``GATED`` as srun steps; the gate is a file of the shared filesystem."""

    stacks, outcome = False, 0

    def start(self) -> None:
        self.monkeypatch.chdir(self.tmp_path)
        self.gate = self.tmp_path / "go"
        spec = self.tmp_path / "esc.yaml"
        spec.write_text(json.dumps({**SPEC, "command": [sys.executable, *GATED[1:], HOSTILE, str(self.gate)]}))
        assert (result := cli("up", "--detach", "-b", "slurm", str(spec))).exit_code == 0, result.output

        def printed() -> bool:
            job = SlurmBackend().describe(NAME)
            return job is not None and all("FORGED" in task.last_line for task in job.tasks)

        wait_for_condition(printed, timeout=180)

    def finish(self) -> None:
        self.gate.touch()
        wait_for_condition(lambda: SlurmBackend().describe(NAME).state.terminal, timeout=180)  # type: ignore[union-attr]

    def close(self) -> None:
        if SlurmBackend().describe(NAME) is not None:
            SlurmBackend().cancel(NAME)


@pytest.fixture
def engine(request: pytest.FixtureRequest, kind: BackendKind) -> None:
    """The real engine of ``kind``, as the suite's helpers find it (required under CI, skipped elsewhere)."""
    if kind is BackendKind.COMPOSE:
        client = request.getfixturevalue("docker_engine")
        request.getfixturevalue("compose_cli")
        if not client.images.list(name=IMAGE):
            unavailable(f"{IMAGE} is not built (.ci/docker.sh builds it)")
    else:
        request.getfixturevalue("slurm_controller")


REAL_ENGINES = [pytest.param(BackendKind.COMPOSE, RealCompose, marks=pytest.mark.docker, id="compose"),
                pytest.param(BackendKind.SLURM, RealSlurm, marks=pytest.mark.slurm, id="slurm")]


STAND_INS: dict[BackendKind, type[StandIn]] = {BackendKind.LOCAL: Local, BackendKind.COMPOSE: Compose,
                                               BackendKind.SLURM: Slurm, BackendKind.K8S: Kubernetes}


@contextmanager
def stand_in(kind: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    assert kind in STAND_INS, f"no stand-in for the {kind.value} backend: add one, so this property holds there"
    cluster = STAND_INS[kind](tmp_path, monkeypatch)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_task_output_is_shown_escaped_by_status_debug_and_the_live_view(
        kind: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with stand_in(kind, tmp_path, monkeypatch) as cluster:
        status = cli("status", NAME, "-b", kind.value)
        assert status.exit_code == 0, status.output
        assert_escaped(status.output)
        document = cli("status", NAME, "-b", kind.value, "-o", "json")
        assert document.exit_code == 0, document.output
        assert_json_escaped(document.output, json.dumps(HOSTILE)[1:-1])

        debug = cli("debug", NAME, "-b", kind.value)
        if cluster.stacks:
            assert debug.exit_code == 0, debug.output
            assert_escaped(debug.output)
            assert "\\x1b]0;pwned\\x07" in debug.output  # the program's name, as py-spy shows it
        else:
            assert debug.exit_code == 1 and debug.output.count("\n") == 1, debug.output

        cluster.finish()
        watched = cli("watch", NAME, "-b", kind.value)
        assert watched.exit_code == cluster.outcome, watched.output  # the job ended, and the view was shown
        assert_escaped(watched.output)


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("kind, real", REAL_ENGINES)
def test_task_output_is_shown_escaped_on_the_real_engine(
        kind: BackendKind, real: type[StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same as above with the backend's own engine: the task's line as the engine carries it."""
    monkeypatch.setitem(STAND_INS, kind, real)
    test_task_output_is_shown_escaped_by_status_debug_and_the_live_view(kind, tmp_path, monkeypatch)


def hostile_spec(tmp_path: Path) -> Path:
    """A spec whose path values carry escapes and a line break, in a file whose name carries them too."""
    directory = tmp_path / "bad\x1b]0;pwned\x07"
    directory.mkdir()
    spec = directory / "spec\x1b[2J.yaml"
    spec.write_text(json.dumps({**SPEC, "command": ["python", "train.py", HOSTILE_VALUE],
                                "env": {"NOTE": HOSTILE_VALUE},
                                "checkpoint": {"dir": f"gs://bucket/{HOSTILE_VALUE}"},
                                "tensorboard": {"dir": f"gs://bucket/tb/{HOSTILE_VALUE}"}}))
    return spec


@pytest.mark.parametrize("output", ["text", "json", "plan"])
@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_spec_values_are_shown_escaped_by_dry_run_and_validate(kind: BackendKind, output: str, tmp_path: Path) -> None:
    spec = hostile_spec(tmp_path)
    shown = cli("dry-run", str(spec), "-b", kind.value, "-o", output)
    assert shown.exit_code in (0, 2), shown.output
    if output == "text" or shown.exit_code == 2:  # a refusal's problem line is escaped too
        assert_escaped(shown.output, shown=shown.exit_code == 0)
    else:  # json: the TF_CONFIGs only; plan: the env and command too
        assert_json_escaped(shown.output, json.dumps(HOSTILE_VALUE)[1:-1] if output == "plan" else "")
    validated = cli("validate", str(spec), "-b", kind.value)
    assert_escaped(validated.output, shown=False)
    assert "\\x1b[2J.yaml" in validated.output, validated.output


def test_logs_stay_raw_as_the_task_wrote_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``logs`` is the task's own output, unescaped (``kubectl logs``, ``docker logs``): docs/security.md. (Not to
    a terminal, click leaves out colour sequences, ``ESC[...m`` and the like, as it always did; the rest is raw.)"""
    with stand_in(BackendKind.K8S, tmp_path, monkeypatch):
        shown = cli("logs", NAME, f"{NAME}-chief-0", "-b", "k8s")
    assert shown.exit_code == 0 and "\x1b]52;c;SGVsbG8=\x07" in shown.output and "\rFORGED\n" in shown.output, \
        repr(shown.output)
