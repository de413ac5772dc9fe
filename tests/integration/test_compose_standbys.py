"""Standby containers on a real Docker engine, without TensorFlow (``launcher.backends.compose.standbys``).

A task container is made here the way compose makes one (hardened, on a
private network); its standby runs a short script that keeps the standby
protocol (``launcher.protocol.standby``) the way ``launcher.worker.standby
--on-signal`` does, so each test takes seconds. The standby module itself
becoming a TensorFlow task is covered by
``test_compose_docker.py::test_mwms_survives_kill_9_of_a_worker_process_and_resumes``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.docker_engine import IMAGE, compose_cli, docker_engine, worker_image  # noqa: F401
from helpers.polling import wait_for_condition
from launcher import api
from launcher.api import validate_data
from launcher.backends.compose import standbys
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Task
from launcher.protocol.standby import CALL_SIGNAL, READY_LINE

pytestmark = pytest.mark.docker

#: A standby as ``launcher.worker.standby --on-signal`` is one, minus the imports: ready, then called.
PROTOCOL_STANDBY = f"""
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.{CALL_SIGNAL.name}}})
print({READY_LINE!r}, flush=True)
signal.sigwait({{signal.{CALL_SIGNAL.name}}})
print('called', flush=True)
"""


@pytest.fixture
def task_container(docker_engine: Any, worker_image: str) -> Iterator[tuple[Task, Any]]:  # noqa: F811
    """An ended task container, hardened as compose makes them, on a network of its own; all removed after."""
    cluster = f"stb{uuid.uuid4().hex[:8]}"
    task = api.plan(validate_data({"name": cluster, "roles": {"chief": {}}}), "compose").tasks[0]
    network = docker_engine.networks.create(cluster, labels={"com.docker.compose.project": cluster})
    container = docker_engine.containers.create(
        IMAGE, ["python", "-c", "print('the first run')"], name=task.name, hostname=task.name, user="1000:1000",
        read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"], init=True, network=network.name,
        labels={"com.docker.compose.project": cluster, "com.docker.compose.service": task.name,
                **naming.labels(cluster, "manual", task.type, task.index)},
    )
    container.start()
    assert container.wait(timeout=60)["StatusCode"] == 0
    try:
        yield task, network
    finally:
        for found in docker_engine.containers.list(all=True, filters={"label": f"com.docker.compose.project={cluster}"}):
            found.remove(force=True, v=True)
        network.remove()


def test_a_called_standby_becomes_the_task_and_its_address_and_the_ended_run_is_kept_for_logs(
    docker_engine: Any, task_container: tuple[Task, Any], tmp_path: Path  # noqa: F811
) -> None:
    task, network = task_container
    task = task.model_copy(update={"standby_command": ["python", "-c", PROTOCOL_STANDBY]})
    standbys.create(docker_engine, task)
    standby = docker_engine.containers.get(standbys.standby_name(task.name))
    host = standby.attrs["HostConfig"]
    assert (host["CpuShares"], host["ReadonlyRootfs"], host["CapDrop"], standby.attrs["Config"]["User"]) == (
        standbys.IDLE_CPU_SHARES, True, ["ALL"], "1000:1000")
    assert standby.labels[standbys.ONEOFF_LABEL] == "True", "compose would count it among the service's containers"
    assert list(standby.attrs["NetworkSettings"]["Networks"]) == [network.name]
    assert not standbys.is_task_container(standby.name)
    wait_for_condition(lambda: READY_LINE.encode() in standby.logs())

    retired: list[Any] = []
    called = standbys.call(docker_engine, task, retired.append)
    assert called is not None and called.id == standby.id
    called.reload()
    assert called.name == task.name and called.attrs["HostConfig"]["CpuShares"] == standbys.NORMAL_CPU_SHARES
    assert called.wait(timeout=60)["StatusCode"] == 0 and b"called" in called.logs(), "the call did not reach it"

    [ended] = retired
    assert ended.name.startswith(task.name + standbys.ENDED_INFIX) and not standbys.is_task_container(ended.name)
    standbys.retire(ended, tmp_path)
    assert "the first run" in standbys.ended_log(tmp_path, task.name).read_text()
    assert standbys.find(docker_engine, ended.name) is None


def test_docker_dns_gives_the_tasks_address_to_the_standby_once_it_took_the_name(
    docker_engine: Any, task_container: tuple[Task, Any], tmp_path: Path  # noqa: F811
) -> None:
    task, network = task_container
    alive = PROTOCOL_STANDBY + "import time\ntime.sleep(600)\n"  # called, it runs on: resolvable
    task = task.model_copy(update={"standby_command": ["python", "-c", alive]})
    standbys.create(docker_engine, task)
    standby = docker_engine.containers.get(standbys.standby_name(task.name))
    wait_for_condition(lambda: READY_LINE.encode() in standby.logs())
    assert standbys.call(docker_engine, task, lambda ended: standbys.retire(ended, tmp_path)) is not None
    standby.reload()
    resolve = f"import socket; print(socket.gethostbyname({task.name!r}))"
    answer = docker_engine.containers.run(IMAGE, ["python", "-c", resolve], network=network.name, remove=True)
    assert answer.decode().strip() == standby.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]


def test_a_standby_that_is_not_ready_is_removed_and_the_task_starts_afresh(
    docker_engine: Any, task_container: tuple[Task, Any]  # noqa: F811
) -> None:
    """A standby whose image predates ``--on-signal`` (or that is still starting) is never signalled."""
    task, _ = task_container
    task = task.model_copy(update={"standby_command": ["python", "-c", "import time; time.sleep(600)"]})
    standbys.create(docker_engine, task)
    assert standbys.call(docker_engine, task, lambda ended: pytest.fail("retired a task for a standby never called")) is None
    assert standbys.find(docker_engine, standbys.standby_name(task.name)) is None
    assert docker_engine.containers.get(task.name).status == "exited", "the ended task container was touched"


def test_a_container_of_another_owner_with_a_standbys_name_is_never_touched(
    docker_engine: Any, task_container: tuple[Task, Any]  # noqa: F811
) -> None:
    task, network = task_container
    foreign = docker_engine.containers.run(IMAGE, ["sleep", "600"], name=standbys.standby_name(task.name), detach=True,
                                           labels={"com.docker.compose.project": network.name})
    with pytest.raises(LaunchError, match="is not tfcluster's"):
        standbys.create(docker_engine, task)
    assert standbys.call(docker_engine, task, lambda ended: pytest.fail("retired a task for a foreign container")) is None
    standbys.remove(docker_engine, task.name)
    foreign.reload()
    assert foreign.status == "running"
