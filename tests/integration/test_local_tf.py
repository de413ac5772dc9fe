"""Real TensorFlow clusters on the local backend: recovery from a task killed with SIGKILL.

Each test launches with ``tfcluster up``, waits for training to be
under way (progress in ``state.json``), kills one task's process with
SIGKILL and checks that the supervisor restarts what the strategy needs,
that training resumes from the backup, and that the job completes; or
kills the supervisor and checks that ``watch`` adopts the tasks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.boards import free_port, scalar_curves, start_board, stop_board
from helpers.local_cluster import CLI, assert_nothing_left, processes, tfcluster, wait_status, write_spec
from helpers.run_names import run_name
from helpers.summaries import assert_monotonic, curve
from helpers.task_events import read_events, run_token
from launcher.backends.local.processes import group_members
from launcher.backends.local.state import LocalState
from launcher.plan.targets import BackendKind
from launcher.supervision.procfs import stat_fields
from launcher.supervision.status import JobStatus, State

pytestmark = pytest.mark.tf

SCRIPTS = Path(__file__).parent / "scripts"
TRAINING = {"epochs": 2, "steps_per_epoch": 15, "batch_size_per_replica": 32}
BACKUP_EVERY = 5
#: A straggler's extra seconds a batch: well above what the suite's other process costs a healthy peer's batch
#: (so one task, not two, stands out), small beside the run.
DELAY = 0.2


def launch(tmp_path: Path, spec: dict[str, Any], epochs: int) -> str:
    """``up --detach`` of ``spec`` under ``run_name`` of its name; returns that name."""
    name = run_name(spec["name"])
    training = {**TRAINING, **spec.get("training", {}), "epochs": epochs}
    path = write_spec(tmp_path, {**spec, "name": name, "training": training, "env": {"TF_CPP_MIN_LOG_LEVEL": "2"}})
    result = tfcluster("up", "--detach", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return name


def kill_task(name: str, task: str) -> None:
    os.kill(LocalState.named(name).read_groups()[task], signal.SIGKILL)


def events(name: str, task: str) -> list[dict[str, Any]]:
    return read_events(LocalState.named(name).task_log(task).read_text().splitlines(), run_token(BackendKind.LOCAL, name))


def finish(name: str) -> JobStatus:
    """Wait for the job to end; it must have succeeded and left no process behind."""
    status = wait_status(name, lambda s: s.state.terminal, timeout=240)
    chief_log = LocalState.named(name).task_log(f"{name}-chief-0").read_text()[-3000:]
    assert status.state is State.SUCCEEDED, f"{status.message}\n{chief_log}"
    assert_nothing_left(*processes(name))
    return status


def test_mwms_survives_a_killed_worker_and_resumes_from_the_backup(tmp_path: Path) -> None:
    """``tfcluster up`` (watching, not detached) of chief + 2 workers exits 0 despite the kill."""
    spec = {"name": run_name("mwk"), "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
            "checkpoint": {"backup_every_steps": BACKUP_EVERY}, "training": {**TRAINING, "epochs": 4},  # far from done
            "tensorboard": {"update_steps": 3}, "env": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
    up = subprocess.Popen([*CLI, "up", str(write_spec(tmp_path, spec))], cwd=tmp_path,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    name = spec["name"]
    wait_status(name, lambda s: (s.progress.step or 0) >= 2 * BACKUP_EVERY, timeout=180)
    kill_task(name, f"{name}-worker-1")
    assert up.wait(timeout=240) == 0, up.stderr.read()
    status = finish(name)
    assert status.restarts == 1 and all(t.restarts == 1 for t in status.tasks)
    for task in status.tasks:  # every restarted task became its standby, which had imported TensorFlow
        [warm] = [e for e in events(name, task.name) if e.event == "warm_start"]
        assert warm.import_seconds > 0, warm
    chief = events(name, f"{name}-chief-0")
    restored = [e for e in chief if e.event == "restored"]
    assert len(restored) == 1 and restored[0].step > 0, restored
    before = max(e.step for e in chief[: chief.index(restored[0])] if e.event == "step")
    assert restored[0].step >= before - BACKUP_EVERY, f"repeated {before - restored[0].step} steps"
    assert any(e.event == "finished" for e in chief[chief.index(restored[0]):])
    # One training curve across the kill: points past the restored step were dropped, then written again once.
    loss = curve(tmp_path / "tfcluster-runs" / name / "tensorboard" / "train", "loss")
    assert_monotonic(loss)
    assert [step for step, _ in loss] == sorted({*range(3, 61, 3), 15, 30, 45, 60})


def test_down_ends_the_standbys_with_the_tasks(tmp_path: Path) -> None:
    """Every training task has a standby (an idle interpreter, started with it); ``down`` leaves none behind."""
    name = launch(tmp_path, {"name": "stb", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}}}, epochs=20)
    wait_status(name, lambda s: (s.progress.step or 0) >= 1, timeout=180)  # the standbys were started with the tasks
    daemon, groups = processes(name)
    assert len(groups) == 4, groups  # two tasks, two standbys
    down = tfcluster("down", name, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert_nothing_left(daemon, groups)


def forked_programs(name: str) -> dict[str, tuple[int, int]]:
    """``{task: (pid, parent pid)}`` of each task's program forked from outside its process group (the zygote's
    child): a process of the group, not its leader (the ``sh`` wrapper), whose parent is not in the group."""
    found = {}
    for task, pgid in LocalState.named(name).read_groups().items():
        members = group_members(pgid)
        forked = [(pid, parent) for pid, parent in members.items() if pid != pgid and parent not in members]
        assert len(forked) == 1, f"{task}: no program forked from outside its group (the one import): {members}"
        found[task] = forked[0]
    return found


def _stepped_after_a_warm_start(chief: list[Any]) -> bool:
    kinds = [e.event for e in chief]
    return "warm_start" in kinds and "step" in kinds[kinds.index("warm_start"):]


@pytest.mark.parametrize("role_env", [False, True], ids=["one-env", "roles-with-env-of-their-own"])
def test_every_run_even_a_restart_early_in_the_run_is_forked_from_an_import_done_before(tmp_path: Path,
                                                                                      role_env: bool) -> None:
    """Restarts cheap whenever they come (issues #36, #47): a zygote per task environment imported TensorFlow
    before the first runs, and every run of every task, the first ones and those a failure right after the first
    step restarts, is its child (seen in /proc); a role with an env of its own has a zygote of its own (before, its
    standbys imported by themselves at idle priority, and a restart early in the run waited for that import)."""
    roles: dict[str, Any] = {"chief": {"replicas": 1}, "worker": {"replicas": 1}}
    if role_env:
        roles = {role: {**spec, "env": {"ROLE_NOTE": role}} for role, spec in roles.items()}
    name = launch(tmp_path, {"name": "zyg-env" if role_env else "zyg", "roles": roles}, epochs=20)
    wait_status(name, lambda s: (s.progress.step or 0) >= 1, timeout=180)
    first = forked_programs(name)
    zygotes = {parent for _, parent in first.values()}
    assert len(zygotes) == (2 if role_env else 1), first
    for zygote in zygotes:
        assert "tensorflow" in Path(f"/proc/{zygote}/maps").read_text(), "a task's parent has not imported TensorFlow"
    kill_task(name, f"{name}-worker-0")
    chief = f"{name}-chief-0"
    ends = time.monotonic() + 180
    while not _stepped_after_a_warm_start(events(name, chief)):  # the restarted tasks train together again
        assert time.monotonic() < ends, "the chief did not train again in its standby"
        time.sleep(0.1)
    again = forked_programs(name)
    assert {task: parent for task, (_, parent) in again.items()} == {task: parent for task, (_, parent) in first.items()}
    assert not {pid for pid, _ in again.values()} & {pid for pid, _ in first.values()}, "not restarted"
    daemon, groups = processes(name)
    down = tfcluster("down", name, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert_nothing_left(daemon, groups)
    ends = time.monotonic() + 30
    for zygote in zygotes:
        while (fields := stat_fields(zygote)) is not None and fields[0] != "Z" and time.monotonic() < ends:
            time.sleep(0.1)
        assert fields is None or fields[0] == "Z", "a zygote outlived the job"


def test_pss_with_evaluator_restarts_every_training_task_when_the_ps_is_killed(tmp_path: Path) -> None:
    name = launch(tmp_path, {"name": "psk", "strategy": "parameter_server",
                             "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1},
                                       "evaluator": {"replicas": 1}}},
                  epochs=12)  # 3 epochs once ended (~1.5 s) between two looks at the status: the kill came too late
    wait_status(name, lambda s: (s.progress.epoch or 0) >= 1, timeout=180)  # epoch 0 is backed up
    kill_task(name, f"{name}-ps-0")
    status = finish(name)
    training = [t for t in status.tasks if not t.name.endswith("evaluator-0")]
    assert status.restarts >= 1 and all(t.restarts >= 1 for t in training)
    # Every task ended by itself with 0 (none was stopped after the grace period): the ps and
    # workers saw the completion marker, the evaluator evaluated the final checkpoint.
    assert all(t.state is State.SUCCEEDED and t.exit_code == 0 for t in status.tasks), status.tasks
    chief = events(name, f"{name}-chief-0")
    restored = [e for e in chief if e.event == "restored"]
    assert restored and restored[-1].epoch >= 1, restored
    evaluations = [e for e in events(name, f"{name}-evaluator-0") if e.event == "evaluation"]
    assert evaluations and evaluations[-1].metrics["accuracy"] > 0.1, evaluations


def test_tensorboard_serves_the_train_and_validation_curves_of_a_local_mwms_run(tmp_path: Path) -> None:
    name = run_name("tbl")
    spec = {"name": name, "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}, "evaluator": {"replicas": 1}},
            "training": TRAINING, "tensorboard": {"update_steps": 5}, "env": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
    up = tfcluster("up", str(write_spec(tmp_path, spec)), cwd=tmp_path, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"`tfcluster tensorboard {name}`" in up.stdout
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["tensorboard_dir"] == str(tmp_path / "tfcluster-runs" / name / "tensorboard")
    port = free_port()
    board, url = start_board([name], port, tmp_path)
    try:
        assert url == f"http://127.0.0.1:{port}/"
        curves = scalar_curves(url, [f"{name}/train", f"{name}/validation"], "loss")
        train_steps = [int(step) for _, step, _ in curves[f"{name}/train"]]
        assert train_steps == [5, 10, 15, 20, 25, 30]  # every update_steps and each epoch's end, by the chief alone
        validation_steps = [int(step) for _, step, _ in curves[f"{name}/validation"]]
        assert validation_steps and validation_steps[-1] == 30 and set(validation_steps) <= {15, 30}
    finally:
        stop_board(board, port)


def test_mwms_survives_kill_9_of_the_supervisor_and_watch_adopts_it(tmp_path: Path) -> None:
    """The tasks train on unsupervised; ``status`` says so at once; ``watch`` adopts them and the job succeeds."""
    name = launch(tmp_path, {"name": "mws", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
                             "checkpoint": {"backup_every_steps": BACKUP_EVERY}, "restart": {"max_restarts": 0}},
                  epochs=6)  # far from done when the supervisor is killed
    wait_status(name, lambda s: (s.progress.step or 0) >= 3, timeout=180)
    daemon, groups = processes(name)
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    status = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    assert status["supervisor"] == "lost", status  # the first status after the kill: nothing waits for a timeout
    watched = tfcluster("watch", name, cwd=tmp_path, timeout=300)
    assert watched.returncode == 0, watched.stdout[-3000:]
    status = finish(name)
    assert status.restarts == 0 and all(t.restarts == 0 for t in status.tasks)
    chief = events(name, f"{name}-chief-0")
    assert [e.event for e in chief].count("started") == 1, "the chief was restarted instead of adopted"
    assert any(e.event == "finished" for e in chief)
    assert_nothing_left(daemon, groups)


def test_mwms_sigterm_to_a_worker_saves_every_task_and_resumes_where_it_was(tmp_path: Path) -> None:
    """A notice (SIGTERM) mid-epoch costs no restart and no work: no backup would be written for 1000 steps.

    4 steps per epoch: the chief reports every step, so the last ``step`` event before the signal
    says where training was.
    """
    name = launch(tmp_path, {"name": "mwt", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
                             "checkpoint": {"backup_every_steps": 1000}, "restart": {"max_restarts": 0},
                             "training": {"steps_per_epoch": 4}}, epochs=12)
    wait_status(name, lambda s: (s.progress.step or 0) >= 10, timeout=180)
    signalled = time.time()
    os.killpg(LocalState.named(name).read_groups()[f"{name}-worker-1"], signal.SIGTERM)  # the task: its process group
    status = finish(name)
    assert (status.restarts, status.preemptions) == (0, 1), status
    chief = events(name, f"{name}-chief-0")
    [preempted] = [e for e in chief if e.event == "preempted"]
    [restored] = [e for e in chief if e.event == "restored"]
    before = max(e.step for e in chief if e.event == "step" and e.time <= signalled)
    assert restored.step == preempted.step
    # Nothing lost: saved at or after the last step reported before the signal (a few steps past it when a task
    # is descheduled between a step and its event), and resumed there.
    assert before <= restored.step < 48, (before, restored)
    assert all(e.exit_code == 143 for t in status.tasks for e in events(name, t.name) if e.event == "preempted")


def test_mwms_worker_stuck_in_its_input_pipeline_is_found_stalled_and_the_job_succeeds(tmp_path: Path) -> None:
    """Worker 1 blocks forever in a tf.py_function once: the watchdog dumps, names it, restarts; the job succeeds."""
    (tmp_path / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    marker = tmp_path / "blocked"
    name = launch(tmp_path, {"name": "stk", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
                             # stacks read after 20 s of silence: worker 1's stand out at once, and the run's own
                             # pace (steps under 1 s, epoch ends of a few, slower beside the suite's other process)
                             # asks for no longer look
                             "checkpoint": {"backup_every_steps": BACKUP_EVERY}, "stall": {"timeout_seconds": 20},
                             "training": {"module": "stuck_input", "args": {"marker": str(marker)}}},
                  epochs=2)
    status = finish(name)
    assert marker.exists()  # it did block, once
    assert status.restarts == 1 and all(t.restarts == 1 for t in status.tasks), status
    assert status.stall is not None and status.stall.stalls == 1 and status.stall.watching
    assert status.stall.suspects == [f"{name}-worker-1"], status.stall
    stacks = Path(status.stall.stacks_dir or "")
    assert sorted(p.name for p in stacks.iterdir()) == [f"{name}-{t}.txt" for t in ("chief-0", "worker-0", "worker-1")]
    assert "in gate" in (stacks / f"{name}-worker-1.txt").read_text()  # the blocked py_function, by name
    assert "script_ops.py" not in (stacks / f"{name}-chief-0.txt").read_text()
    chief = events(name, f"{name}-chief-0")
    restored = [e for e in chief if e.event == "restored"]
    assert len(restored) == 1 and restored[0].step >= BACKUP_EVERY, restored  # from the backup, not from scratch


def test_pss_worker_stuck_but_alive_is_found_stalled_and_restarted_alone(tmp_path: Path) -> None:
    """A ParameterServer worker that stops answering (SIGSTOP: alive, its connections open) holds one closure.

    The coordinator keeps scheduling on worker 0 until the epoch's end waits for that closure, forever:
    TensorFlow reports nothing. The watchdog sees the chief's steps stop, the stopped worker is the one
    task that gives no stacks, and it alone restarts; the coordinator runs the closure elsewhere and the
    job succeeds, the chief, the ps and worker 0 never restarted.
    """
    name = launch(tmp_path, {"name": "pst", "strategy": "parameter_server",
                             "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}, "ps": {"replicas": 1}},
                             # time alone after 45 s: on a loaded CI host a PSS epoch's end (the chief waiting in
                             # native code on the ps, stacks unchanged) once took over 20 s, and a 20 s floor
                             # restarted the whole healthy group as the spec asked; the stopped worker is found by
                             # its stacks (it gives none) once the silence passes min(floor, 30 s)
                             "stall": {"timeout_seconds": 45}}, epochs=8)
    wait_status(name, lambda s: (s.progress.epoch or 0) >= 1, timeout=180)
    os.killpg(LocalState.named(name).read_groups()[f"{name}-worker-1"], signal.SIGSTOP)
    status = finish(name)
    assert status.stall is not None and status.stall.stalls >= 1, status.stall
    assert status.stall.suspects == [f"{name}-worker-1"], status.stall
    assert [t.restarts for t in status.tasks] == [0, 0, status.stall.stalls, 0], status.tasks  # chief, w0, w1, ps
    assert status.restarts == status.stall.stalls
    stacks = Path(status.stall.stacks_dir or "")
    assert "did not answer" in (stacks / f"{name}-worker-1.txt").read_text()
    assert "launcher/worker" in (stacks / f"{name}-chief-0.txt").read_text()


def test_a_chief_killed_while_its_asynchronous_backup_is_written_restores_the_previous_complete_one(
        tmp_path: Path) -> None:
    """The chief's backup of step 10 is written but never recorded (its write thread stops before TensorFlow
    records it); training goes on meanwhile, which a synchronous save would not allow; kill -9 of the chief:
    the restart restores the backup of step 5, complete, and the job succeeds."""
    (tmp_path / "stuck_backup.py").write_text((SCRIPTS / "stuck_backup.py").read_text())
    marker = tmp_path / "stuck"
    name = launch(tmp_path, {"name": "abk", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}},
                             "checkpoint": {"backup_every_steps": 5},
                             "training": {"module": "stuck_backup", "args": {"marker": str(marker)},
                                          "steps_per_epoch": 20}},
                  epochs=2)
    # Step 15's event comes before its backup, which waits for the stuck write: the step proves the overlap.
    wait_status(name, lambda s: marker.exists() and (s.progress.step or 0) >= 15, timeout=180)
    assert "/backup/chief/ckpt-2" in marker.read_text()
    kill_task(name, f"{name}-chief-0")
    status = finish(name)
    assert status.restarts == 1, status
    chief = events(name, f"{name}-chief-0")
    [restored] = [e for e in chief if e.event == "restored"]
    assert restored.step == 5, restored
    assert any(e.event == "finished" for e in chief[chief.index(restored):])


def test_debug_prints_the_stacks_of_every_task_of_a_running_job(tmp_path: Path) -> None:
    name = launch(tmp_path, {"name": "dbg", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 1}}}, epochs=40)
    try:
        step = wait_status(name, lambda s: (s.progress.step or 0) >= 3, timeout=180).progress.step or 0
        for _ in range(3):
            result = tfcluster("debug", name, cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            sections = result.stdout.split("== ")[1:]
            assert [s.splitlines()[0] for s in sections] == [f"{name}-chief-0", f"{name}-worker-0"]
            if all("launcher/worker/train.py" in s for s in sections):
                break
            # faulthandler prints 100 frames a thread: a task tracing a tf.function (at an epoch's end) is deeper
            # than that. Asked again a few steps later.
            step += 5
            wait_status(name, lambda s, after=step: (s.progress.step or 0) >= after, timeout=180)
        for section in sections:
            assert " 0x" in section and "(most recent call first)" in section, section[:2000]
            assert "launcher/worker/train.py" in section, section[:2000]
        assert wait_status(name, lambda s: True, timeout=5).state is State.RUNNING  # asking stopped nothing
    finally:
        tfcluster("down", name, cwd=tmp_path)


def test_a_worker_with_a_slow_input_pipeline_is_named_a_straggler_with_its_numbers(tmp_path: Path) -> None:
    (tmp_path / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    name = launch(tmp_path, {"name": "slow", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
                             "training": {"module": "stuck_input", "args": {"slow_worker": 1, "step_delay": DELAY}}},
                  epochs=2)
    finish(name)
    document = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    [straggler] = document["stragglers"]
    assert straggler["task"] == f"{name}-worker-1" and straggler["measure"] == "input_seconds_per_batch", straggler
    assert all(t["step_time"]["compute_seconds_per_batch"] > 0 for t in document["tasks"]), document["tasks"]
    assert straggler["seconds"] >= DELAY and straggler["ratio"] >= 1.5, straggler
    assert document["stall"]["stalls"] == 0


def test_a_worker_with_a_slow_device_is_named_a_straggler_by_its_compute_its_peers_wait(tmp_path: Path) -> None:
    """Every task's wall time per step is the slow one's; its own breakdown tells it from its peers."""
    (tmp_path / "stuck_input.py").write_text((SCRIPTS / "stuck_input.py").read_text())
    name = launch(tmp_path, {"name": "slowc", "roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}},
                             "training": {"module": "stuck_input",
                                          "args": {"slow_compute_worker": 1, "compute_delay": DELAY}}},
                  epochs=2)
    finish(name)
    document = json.loads(tfcluster("status", name, "-o", "json", cwd=tmp_path).stdout)
    [straggler] = document["stragglers"]
    assert straggler["task"] == f"{name}-worker-1" and straggler["measure"] == "compute_seconds_per_batch", straggler
    assert straggler["seconds"] >= DELAY and straggler["ratio"] >= 1.5, straggler
    times = {t["name"]: t["step_time"] for t in document["tasks"]}
    slow = times.pop(f"{name}-worker-1")
    assert slow["seconds_per_step"] >= DELAY, slow
    for task, peer in times.items():  # they waited for it
        assert peer["compute_seconds_per_batch"] < slow["compute_seconds_per_batch"], (task, peer, slow)
        assert peer["peer_wait_seconds_per_step"] > slow["peer_wait_seconds_per_step"], (task, peer, slow)
