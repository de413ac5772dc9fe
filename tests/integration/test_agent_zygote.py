"""A Kubernetes task's held agent with the entrypoint's standby, its processes real as in a task pod
(``launcher.worker.agent --standby STANDBY --zygote ZYGOTE -- python -m launcher.worker``, as a pod's): one
zygote imports TensorFlow once, and every run, the first too, is its fork in the process group of the standby the
agent called. kill -9 of the forked task ends the run with 137, as a crash does; the next run is forked at once
(``warm_start``: TensorFlow imported before the call) by the same zygote; the stack endpoint answers the forked
task's stacks; SIGTERM to the agent reaches the forked task (its notice handler: 143) and ends the agent with it;
then nothing of the agent's is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers.boards import free_port
from helpers.paths import REPO
from helpers.polling import wait_for_condition
from helpers.required import unavailable
from helpers.tf_cluster import cluster_spec, make_plan
from launcher.plan.targets import zygote_command
from launcher.protocol import agent_control, env
from launcher.protocol.endpoint_wire import STACKS_PORT
from launcher.protocol.events import Event, EventKind, EventReader
from launcher.protocol.pyspy_command import pyspy_binary
from launcher.protocol.stack_endpoint import ask, order
from launcher.supervision.procfs import stat_fields

pytestmark = pytest.mark.tf

#: The user's program: its model never comes (the task waits in Python, where signals reach its handlers); it says
#: where it is by writing its pid to ``marker``.
BLOCKER = """
import os, pathlib, time
def build_model(marker):
    pathlib.Path(marker).write_text(str(os.getpid()))
    while True:
        time.sleep(0.05)
def make_dataset(input_context, global_batch_size, marker):
    raise AssertionError("never asked")
"""
#: The longest a step of this test waits (the zygote's import on a loaded host; never reached when it works).
PATIENCE = 180.0


def in_build_model(marker: Path) -> str:
    """The pid a run wrote to ``marker`` once in ``build_model`` (the file whole, not just made)."""
    wait_for_condition(lambda: marker.is_file() and marker.read_text(), PATIENCE)
    return marker.read_text()


def parent(pid: int) -> int:
    fields = stat_fields(pid)
    assert fields is not None, f"process {pid} is gone"
    return int(fields[1])


def group(pid: int) -> int:
    return os.getpgid(pid)


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_every_run_is_a_fork_of_the_pods_one_zygote_whose_signals_stacks_and_exit_are_the_tasks(tmp_path: Path) -> None:
    if pyspy_binary() is None:
        unavailable("needs py-spy (the test extra installs it) for the stack endpoint's answer", "tf")
    (tmp_path / "blocker.py").write_text(BLOCKER)
    marker = tmp_path / "in-build-model"
    spec = cluster_spec("agz", {"chief": 1}, tmp_path / "checkpoints",
                        training={"module": "blocker", "args": {"marker": str(marker)}})
    plan = make_plan(spec, "local", "run1", launching=True)
    [task] = plan.tasks
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if k != env.TF_CONFIG}
    agent = subprocess.Popen(
        [sys.executable, "-m", "launcher.worker.agent", agent_control.STANDBY_OPTION, json.dumps(task.standby_command),
         agent_control.ZYGOTE_OPTION, json.dumps(zygote_command(task.standby_command)), "--", *task.command],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**environ, **plan.task_env(task), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
             "TF_CPP_MIN_LOG_LEVEL": "2", STACKS_PORT: str(port), env.EVENT_TOKEN: plan.event_token})
    lines: list[str] = []
    follower = threading.Thread(target=lambda: lines.extend(line.decode(errors="replace") for line in agent.stdout or []),
                              daemon=True)
    follower.start()

    def exits() -> list[agent_control.AgentState]:
        return [state for line in list(lines) if (state := agent_control.read_exit(line, plan.event_token))]

    def events(kind: EventKind) -> list[Event]:
        reader = EventReader(plan.event_token)
        return [e for line in list(lines) if (e := reader.parse(line)) is not None and e.event is kind]

    try:
        first = int(in_build_model(marker))
        zygote = parent(first)
        assert b"launcher.worker.zygote" in cmdline(zygote) and parent(zygote) == agent.pid
        assert "tensorflow" in Path(f"/proc/{zygote}/maps").read_text()  # it imported: the pod's one import
        standby = group(first)  # the standby the agent called leads the run's group, which the task joined
        assert standby != group(agent.pid) and parent(standby) == agent.pid
        assert b"launcher.worker.standby" in cmdline(standby)
        answer, why = ask("127.0.0.1", port, plan.event_token)
        assert answer is not None and "build_model" in answer and f"Process {first}" in answer, (answer, why)

        marker.unlink()
        os.kill(first, signal.SIGKILL)  # a crash of the task itself
        wait_for_condition(exits, PATIENCE)
        assert [(s.run, s.exit_code) for s in exits()] == [(1, 137)]
        assert not events(EventKind.WARM_START)  # the first run waited for the import
        state, why = order("127.0.0.1", port, agent_control.Start(token=plan.event_token))
        assert state is not None and state.started and state.run == 2, why

        second = int(in_build_model(marker))
        assert second != first and parent(second) == zygote  # forked by the same zygote: no second import
        assert len(events(EventKind.WARM_START)) == 1
        agent.send_signal(signal.SIGTERM)  # the kubelet's, at a pod's deletion: through the group to the task
        assert agent.wait(timeout=PATIENCE) == 143
        follower.join(PATIENCE)
        assert [(s.run, s.exit_code) for s in exits()] == [(1, 137), (2, 143)]
        assert events(EventKind.PREEMPTED)  # the task's own notice handler ran
        wait_for_condition(lambda: all((fields := stat_fields(pid)) is None or fields[0] == "Z"
                                       for pid in (zygote, second)), PATIENCE)  # ended with the agent
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
