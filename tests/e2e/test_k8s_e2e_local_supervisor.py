"""``kubernetes.supervisor: false`` on the real cluster: the run's one supervisor is a process on this machine.

``tfcluster up -d`` applies the Jobs suspended and starts that process (detached, its state dir under
TFCLUSTER_HOME); it starts the tasks and publishes to the run's ConfigMap. Killed (``kill -9``: the laptop's
process gone), ``status`` says its supervisor is lost and the tasks run on unsupervised; ``tfcluster watch`` starts
a new one that adopts them (no restart) and follows the run to its end. The chief ends only once the test lets it
(a file it waits for in its own container, made through ``pods/exec``): every step is ordered by an event.
No supervisor, the killed one included, leaves a copy of the kubeconfig's key in the temporary directory (the
client's files of embedded keys are kept in memory: ``kubeapi._in_memory_file``).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.gates import BLOCK, wait_for
from helpers.k8s_e2e import SharedClaim, cli, image, kubeconfig, namespace, open_gate, run_name, running_pod, supervise_until
from helpers.polling import wait_for_condition
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.status import State, SupervisorState

pytestmark = pytest.mark.e2e

#: In the chief's own container: it ends (0) once this file exists.
GO = Path("/tmp/e2e-go")


def key_copies() -> set[Path]:
    """The files in the temporary directory holding the kubeconfig's client key (a file another test removes while
    it is read holds nothing)."""
    user = yaml.safe_load(Path(kubeconfig()).read_text())["users"][0]["user"]
    key = base64.b64decode(user["client-key-data"])

    def holds_key(path: Path) -> bool:
        try:
            return path.is_file() and path.stat().st_size == len(key) and path.read_bytes() == key
        except OSError:
            return False

    return set(filter(holds_key, Path(tempfile.gettempdir()).iterdir()))


def test_a_run_supervised_from_this_machine_is_adopted_by_watch_after_its_process_died(
        tmp_path: Path, taken_down: list[str], backend: KubernetesBackend, core: Any,
        shared_claim: SharedClaim) -> None:
    name = run_name("e2e-local")
    spec = {"name": name, "image": image(),
            "roles": {"chief": {"command": ["python", "-c", wait_for(GO)]},
                      "worker": {"replicas": 1, "command": ["python", "-c", BLOCK]}},
            "kubernetes": {"namespace": namespace(), "supervisor": False, "volume_claim": {"name": shared_claim.name()}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    taken_down.append(name)
    up = cli("up", "job.yaml", "-b", "k8s", "-d", cwd=tmp_path)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    assert "is supervised by a process on this machine" in up.stderr, up.stderr
    state = StateDir.of(BackendKind.K8S, name)
    first = state.supervisor()
    assert first is not None, state.last_log_line()
    assert not [o for o in core.list_namespaced_pod(namespace(), label_selector=f"{naming.LABEL_SUPERVISOR}={name}").items]
    running = supervise_until(backend, name, lambda s: len(s.tasks) == 2
                              and all(t.state is State.RUNNING for t in s.tasks))
    assert running.supervisor is SupervisorState.ALIVE, running

    os.kill(first, signal.SIGKILL)
    lost = supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.LOST)
    assert lost.state is State.RUNNING, lost  # the tasks run on, unsupervised

    env = {**os.environ, "KUBECONFIG": kubeconfig()}
    copies = key_copies()  # an earlier version's, if any: this run's supervisors write none, the killed one neither
    watched = tmp_path / "watch.out"
    with watched.open("w") as out:
        watch = subprocess.Popen([sys.executable, "-m", "launcher", "watch", name], cwd=tmp_path, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    try:
        adopted = supervise_until(backend, name, lambda s: s.supervisor is SupervisorState.ALIVE)
        second = state.supervisor()
        assert second not in (None, first)
        assert adopted.state is State.RUNNING and adopted.restarts == 0, adopted
        chief = running_pod(core, f"{name}-chief-0")
        open_gate(core, chief, GO)
        watch.wait(timeout=300)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, watched.read_text()[-3000:]
    done = backend.describe(name)
    assert done is not None and done.state is State.SUCCEEDED and done.restarts == 0, done
    assert [t.state for t in done.tasks] == [State.SUCCEEDED, State.CANCELLED], done.tasks
    wait_for_condition(lambda: state.supervisor() != second, timeout=60)  # it ends with the run
    assert key_copies() == copies
