"""The same job shows the same progress on every backend.

One event stream (the lead task's and the evaluator's) goes through each
backend's own status path: real processes under the local supervisor, real
containers under the compose supervisor (``docker``), pod logs of the fake
Kubernetes API followed by the same supervisor over ``KubernetesRuntime`` and
read back by ``KubernetesBackend.describe`` from what it published. Each must give the
progress written out below by hand (not computed by the fold under test).
Before any event, a job of the built-in entrypoint is seeded the same on the
local supervisor and on Kubernetes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fakes.kubernetes_api import FakeKubernetes
from helpers.docker_engine import Clusters, clusters, compose_cli, docker_engine, worker_image  # noqa: F401
from helpers.k8s_fake import backend_for, fake_fixture, pod_of, settled  # noqa: F401  (the fixture ``fake``)
from helpers.k8s_specs import DEMO, dry_run_for, plan_for
from helpers.local_cluster import tfcluster, write_spec
from helpers.run_names import run_name
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.cluster_state import ConfigMapStore
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.cli.watch import status_view
from launcher.protocol import env
from launcher.protocol.events import MANUAL_TOKEN, EventKind
from launcher.protocol.job_progress import JobProgress
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

#: Each event line's start, its token a placeholder: a task prints it with the token of its environment, as a
#: program writing events by hand does (docs/spec.md, "Bring your own script").
TOKEN = "<token>"
EVENT = f"TFCLUSTER_EVENT/{TOKEN} "
NAME = run_name("p")
#: The chief's lines, ``<name>`` the run's name (``NAME``).
LEAD = [line.replace("<name>", NAME) for line in [
    EVENT + '{"event":"started","task":"<name>-chief-0","time":10,"strategy":"MirroredStrategy","num_replicas_in_sync":2,'
            '"epochs":2}',
    "an ordinary log line",
    EVENT + '{"event":"step","task":"<name>-chief-0","time":11,"epoch":0,"step":4,"total_steps":8,"loss":0.75}',
    EVENT + '{"event":"epoch","task":"<name>-chief-0","time":12,"epoch":0,"step":4,"metrics":{"loss":0.5,"accuracy":0.6},'
            '"input_wait_fraction":0.25}',
    EVENT + '{"event":"checkpoint","task":"<name>-chief-0","time":13,"epoch":0,"path":"/c/ckpt-0001"}',
    EVENT + '{"event":"finished","task":"<name>-chief-0","time":14,"metrics":{"loss":0.25},"model_path":"/c/model"}',
]]
EVALUATOR = [EVENT + '{"event":"evaluation","task":"<name>-evaluator-0","time":15,"checkpoint":"/c/ckpt-0001",'
                     '"metrics":{"accuracy":0.5}}'.replace("<name>", NAME)]
EXPECTED = JobProgress(
    event=EventKind.FINISHED, time=14, strategy="MirroredStrategy", num_replicas_in_sync=2, epochs=2, epoch=0, step=4,
    total_steps=8, loss=0.5, metrics={"loss": 0.25}, input_wait_fraction=0.25, evaluation={"accuracy": 0.5},
    model_path="/c/model",
)


def _printing(python: str, lines: list[str]) -> list[str]:
    text = chr(10).join(lines)
    return [python, "-c", f"import os; print({text!r}.replace({TOKEN!r}, os.environ[{env.EVENT_TOKEN!r}]), flush=True)"]


def spec(python: str) -> dict[str, Any]:
    """Cluster ``NAME``: the chief prints ``LEAD``, the evaluator ``EVALUATOR``, the worker nothing."""
    return {"name": NAME, "roles": {"chief": {"command": _printing(python, LEAD)},
                                   "worker": {"command": [python, "-c", "pass"]},
                                   "evaluator": {"command": _printing(python, EVALUATOR)}}}


#: The live view's progress line for ``EXPECTED`` (``watch``).
SHOWN = "[###############...............] step 4/8 epoch 1/2  loss 0.5000  model: /c/model"


def shown(job: JobStatus) -> str:
    """What the live view (``watch``) shows of ``job``."""
    console = Console(width=200, record=True)
    console.print(status_view(job))
    return console.export_text()


def test_local(tmp_path: Path) -> None:
    path = write_spec(tmp_path, spec(sys.executable))
    result = tfcluster("up", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(tfcluster("status", NAME, "-o", "json", cwd=tmp_path).stdout)
    assert status["state"] == "succeeded"
    assert set(status["progress"]) == set(JobProgress.model_fields)  # every field, set or not
    job = JobStatus.from_dict(status)
    assert job.progress == EXPECTED and SHOWN in shown(job)
    assert tfcluster("down", NAME, "--volumes", cwd=tmp_path).returncode == 0


@pytest.mark.docker
def test_compose(clusters: Clusters) -> None:  # noqa: F811
    clusters.up(spec("python"))
    job = clusters.wait(NAME, timeout=120)
    assert job.state is State.SUCCEEDED, job.message
    assert set(job.to_dict()["progress"]) == set(JobProgress.model_fields)
    assert job.progress == EXPECTED and SHOWN in shown(job)


def _supervised(fake: FakeKubernetes, data: dict[str, Any], script: Callable[[int, Supervisor], None]) -> KubernetesBackend:
    """``data`` applied on the fake API (its Job controller running) and supervised as its supervisor pod does: the
    one ``Supervisor`` over ``KubernetesRuntime``, publishing to the run's ConfigMap (``ConfigMapStore``); its pause
    moves the fake's clock and plays ``script(round, supervisor)``. The backend ``describe`` then reads it with."""
    fake.job_controller = True
    backend = backend_for(fake)
    dry_run = dry_run_for(data)
    backend.submit(dry_run)
    store = ConfigMapStore(backend.api, dry_run.plan.name, "default", in_pod=True)
    runtime = KubernetesRuntime(backend.api, dry_run.plan, "default", clock=lambda: fake.now,
                                pause=lambda seconds: setattr(fake, "now", fake.now + seconds), objects=settled(fake))
    rounds = 0

    def pause(seconds: float) -> None:
        nonlocal rounds
        rounds += 1
        assert rounds < 200, "the supervisor did not end"
        fake.now += max(seconds, 0.5)
        script(rounds, supervisor)

    supervisor = Supervisor(store.read_plan(), runtime, on_status=store.write_status,
                            tuning=Tuning(poll_seconds=0.5, linger_seconds=1.0, pause=pause, clock=lambda: fake.now))
    try:
        supervisor.run()
    finally:
        runtime.close()
    return backend


def test_kubernetes(fake: FakeKubernetes) -> None:
    def script(round_: int, supervisor: Supervisor) -> None:
        if round_ == 1:
            fake.pod_logs["default", pod_of(fake, f"{NAME}-chief-0")] = "\n".join(LEAD).replace(TOKEN, MANUAL_TOKEN) + "\n"
            fake.pod_logs["default", pod_of(fake, f"{NAME}-evaluator-0")] = (
                "\n".join(EVALUATOR).replace(TOKEN, MANUAL_TOKEN) + "\n")
        elif round_ == 3:
            for task in (f"{NAME}-worker-0", f"{NAME}-evaluator-0", f"{NAME}-chief-0"):
                fake.finish_pod(pod_of(fake, task), 0)

    backend = _supervised(fake, spec("python"), script)
    status = backend.describe(NAME)
    assert status is not None and status.state is State.SUCCEEDED, status
    assert set(status.to_dict()["progress"]) == set(JobProgress.model_fields)
    assert status.progress == EXPECTED and SHOWN in shown(status)


def test_a_job_of_the_entrypoint_is_seeded_alike_before_any_event(fake: FakeKubernetes) -> None:
    seeded = JobProgress(epochs=3, total_steps=120, backup_every_steps=20)  # examples/demo.yaml: 3 epochs of 40 steps
    backend = _supervised(fake, DEMO, lambda round_, supervisor: supervisor.cancel())
    status = backend.describe("demo")  # the supervisor started the tasks, which wrote no event
    assert status is not None and status.progress == seeded
    assert Supervisor(plan_for(DEMO), runtime=None).status().progress == seeded  # type: ignore[arg-type]
