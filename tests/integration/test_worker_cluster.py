"""The shared entrypoint in real loopback clusters: MWMS, PSS with an evaluator, custom loop, restart.

Every task is a real ``python -m launcher.worker`` process started from the
local plan (``tests/helpers/tf_cluster.py``); no supervisor is involved.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.summaries import assert_monotonic, curve, tags
from helpers.tf_cluster import TaskResult, cluster_spec, describe, run_cluster, start_cluster
from launcher.protocol.events import EventReader

pytestmark = pytest.mark.tf

ARGS = {"learning_rate": 0.003}
SCORE = """
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from launcher.examples import mnist
model = tf.keras.models.load_model(sys.argv[1])
print(json.dumps(model.evaluate(mnist.make_eval_dataset(256, learning_rate=0.003), verbose=0, return_dict=True)))
"""


def held_out_accuracy(model_path: str) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", SCORE, model_path],
        capture_output=True, text=True, timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["accuracy"]


def assert_all_ok(results: dict[str, TaskResult]) -> None:
    assert all(r.returncode == 0 for r in results.values()), describe(results)


def test_mwms_chief_and_two_workers_train_and_export_a_model_that_scores(tmp_path: Path) -> None:
    spec = cluster_spec(
        "mw", {"chief": 1, "worker": 2}, tmp_path,
        training={"epochs": 2, "steps_per_epoch": 15, "batch_size_per_replica": 32, "args": ARGS},
    )
    results = run_cluster(spec, "run1")
    assert_all_ok(results)
    chief = results["mw-chief-0"]
    [started] = chief.of("started")
    assert (started.strategy, started.num_replicas_in_sync, started.global_batch_size) == ("CollectiveAllReduceStrategy", 3, 96)
    steps = [e.step for e in chief.of("step")]
    assert steps == sorted(steps) and steps[-1] == 30 and all(e.total_steps == 30 for e in chief.of("step"))
    epochs = chief.of("epoch")
    assert [e.epoch for e in epochs] == [0, 1]
    last_step = chief.of("step")[-1]  # tf_keras sums batch-level losses over replicas; events must not
    assert last_step.loss == pytest.approx(epochs[-1].metrics["loss"], rel=0.05)
    assert all(0 <= e.input_wait_fraction <= 1 and "accuracy" in e.metrics and "loss" in e.metrics for e in epochs)
    assert [e.path for e in chief.of("checkpoint")] == [str(tmp_path / "checkpoints" / f"ckpt-000{n}") for n in (1, 2)]
    [finished] = chief.of("finished")
    assert finished.model_path == str(tmp_path / "model" / "model.keras")
    for worker in ("mw-worker-0", "mw-worker-1"):  # progress is reported once, by the chief
        assert not results[worker].of("step") and not results[worker].of("checkpoint")
        assert results[worker].of("finished")[0].model_path is None
    assert (tmp_path / "_tfcluster" / "run1" / "DONE").is_file()
    assert not list((tmp_path / "backup").rglob("*.index")), "BackupAndRestore backup left after success"
    assert not list((tmp_path / "_tfcluster" / "tmp").rglob("*")), "non-chief scratch copies left behind"
    assert held_out_accuracy(finished.model_path) > 0.4
    train = tmp_path / "tensorboard" / "train"  # the default log dir; one writer: the chief
    assert len(list(train.glob("*tfevents*"))) == 1 and not (tmp_path / "tensorboard" / "validation").exists()
    assert {"loss", "accuracy", "learning_rate", "examples_per_second", "input_wait_fraction"} <= tags(train)
    loss = curve(train, "loss")
    assert [step for step, _ in loss] == [10, 15, 20, 30]  # every update_steps (10) and at each epoch's end (15)
    assert loss[-1][1] == pytest.approx(epochs[-1].metrics["loss"], rel=1e-5)
    assert [step for step, _ in curve(train, "input_wait_fraction")] == [15, 30]
    assert all(0 <= value <= 1 for _, value in curve(train, "accuracy"))  # batch logs: summed replicas scaled back


def test_pss_servers_stop_at_done_and_the_evaluator_evaluates_the_final_checkpoint(tmp_path: Path) -> None:
    spec = cluster_spec("pss", {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1}, tmp_path)
    results = run_cluster(spec, "run1", timeout=200, cluster_file=True)  # evaluator: TFCLUSTER_TASK_ADDRESS
    assert_all_ok(results)  # ps, workers and evaluator exited 0 on their own: the helper kills only at the timeout
    chief = results["pss-chief-0"]
    assert chief.of("started")[0].strategy == "ParameterServerStrategyV2"
    assert [e.epoch for e in chief.of("epoch")] == [0, 1]
    assert chief.of("step") and chief.of("finished")[0].model_path
    evaluations = results["pss-evaluator-0"].of("evaluation")
    assert evaluations and evaluations[-1].checkpoint == str(tmp_path / "checkpoints" / "ckpt-0002")
    assert 0 <= evaluations[-1].metrics["accuracy"] <= 1
    steps_per_epoch = spec.training.steps_per_epoch
    validation = curve(tmp_path / "tensorboard" / "validation", "loss")  # at each evaluated checkpoint's step
    assert validation and validation[-1] == (2 * steps_per_epoch, pytest.approx(evaluations[-1].metrics["loss"]))
    assert_monotonic(validation)
    train = curve(tmp_path / "tensorboard" / "train", "loss")  # written by the coordinator
    assert len(train) >= 2 and train[-1][0] == 2 * steps_per_epoch


def test_a_new_launch_from_scratch_replaces_the_validation_curve_of_an_earlier_one(tmp_path: Path) -> None:
    """A finished run launched again (3 epochs, then 2): the evaluator skips the earlier launch's last
    checkpoint and the validation curve holds only the new launch's points, as the training curve does."""
    first = run_cluster(cluster_spec("again", {"chief": 1, "evaluator": 1}, tmp_path,
                                     training={"epochs": 3, "steps_per_epoch": 10, "batch_size_per_replica": 32}), "run1")
    assert_all_ok(first)
    assert curve(tmp_path / "tensorboard" / "validation", "loss")[-1][0] == 30
    second = run_cluster(cluster_spec("again", {"chief": 1, "evaluator": 1}, tmp_path), "run2")
    assert_all_ok(second)
    evaluations = second["again-evaluator-0"].of("evaluation")
    assert evaluations and not [e for e in evaluations if e.checkpoint.endswith("ckpt-0003")], evaluations
    evaluated = {int(e.checkpoint[-4:]) * 10: e.metrics["loss"] for e in evaluations}
    validation = curve(tmp_path / "tensorboard" / "validation", "loss")
    assert validation and validation[-1][0] == 20, validation
    assert validation == [(step, pytest.approx(evaluated[step])) for step, _ in validation]
    assert [step for step, _ in curve(tmp_path / "tensorboard" / "train", "loss")][-1] == 20


def test_an_evaluator_that_starts_after_the_chief_finished_evaluates_the_final_checkpoint(tmp_path: Path) -> None:
    spec = cluster_spec("late", {"chief": 1, "evaluator": 1}, tmp_path)  # 2 epochs of 10 steps
    assert_all_ok(run_cluster(spec, "run1", only={"late-chief-0"}))
    [evaluator] = run_cluster(spec, "run1", only={"late-evaluator-0"}).values()
    assert evaluator.returncode == 0, evaluator.output[-3000:]
    assert [e.checkpoint[-4:] for e in evaluator.of("evaluation")] == ["0002"]
    assert [step for step, _ in curve(tmp_path / "tensorboard" / "validation", "loss")] == [20]


def test_custom_loop_runs_the_users_train_step_under_mwms_from_the_cluster_file(tmp_path: Path) -> None:
    spec = cluster_spec(
        "cl", {"chief": 1, "worker": 1}, tmp_path,
        training={"epochs": 2, "steps_per_epoch": 15, "batch_size_per_replica": 32, "loop": "custom", "args": ARGS},
    )
    results = run_cluster(spec, "run1", cluster_file=True)  # no TF_CONFIG: built from TFCLUSTER_CLUSTER_FILE
    assert_all_ok(results)
    chief = results["cl-chief-0"]
    assert chief.of("started")[0].num_replicas_in_sync == 2
    losses = [e.loss for e in chief.of("step")]
    assert len(losses) >= 4 and losses[-1] < losses[0], losses
    assert len(chief.of("checkpoint")) == 2
    assert [step for step, _ in curve(tmp_path / "tensorboard" / "train", "loss")] == [10, 15, 20, 30]
    assert held_out_accuracy(chief.of("finished")[0].model_path) > 0.4
    scratch = [p for d in ("tmp", "tmp-backup") for p in (tmp_path / "_tfcluster" / d).rglob("*") if p.is_file()]
    assert not scratch, "non-lead scratch copies (asynchronous backups included) left behind"


def test_single_task_auto_picks_the_default_strategy_on_cpu(tmp_path: Path) -> None:
    spec = cluster_spec("one", {"chief": 1}, tmp_path, training={"epochs": 1, "steps_per_epoch": 8, "batch_size_per_replica": 32, "loop": "custom"})
    results = run_cluster(spec, "run1")
    assert_all_ok(results)
    chief = results["one-chief-0"]
    assert chief.of("started")[0].strategy == "_DefaultDistributionStrategy"
    assert [e.step for e in chief.of("step")] == [1, 2, 4, 6, 8]  # the run's first step, then every 2
    assert Path(chief.of("finished")[0].model_path).is_file() and (tmp_path / "_tfcluster" / "run1" / "DONE").is_file()


def wait_for_step(cluster, task: str, step: int, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = [e for e in map(EventReader(cluster.plan.event_token).parse, cluster.output(task).split("\n")) if e]
        if any(e.event == "step" and e.step >= step for e in events):
            return
        assert all(p.poll() is None for p in cluster.procs.values()), "a task ended early"
        time.sleep(0.2)
    raise AssertionError(f"{task} did not reach step {step}")


def test_dead_peer_exits_175_and_a_restart_resumes_from_the_backup(tmp_path: Path) -> None:
    spec = cluster_spec(
        "rs", {"chief": 1, "worker": 1}, tmp_path,
        checkpoint={"dir": str(tmp_path), "backup_every_steps": 5},
        training={"epochs": 4, "steps_per_epoch": 20, "batch_size_per_replica": 32},
        tensorboard={"update_steps": 2},
    )
    # Killed past step 10 (a step's event precedes its backup; the backup of step 10 precedes step 11), with ~70
    # steps to go: far from done.
    first = start_cluster(spec, "run1")
    wait_for_step(first, "rs-chief-0", 11)
    first.procs["rs-worker-0"].send_signal(signal.SIGKILL)
    results = first.wait(timeout=120)
    assert results["rs-chief-0"].returncode == 175, describe(results)
    assert results["rs-chief-0"].of("failed")[0].exit_code == 175

    second = run_cluster(spec, "run2")
    assert_all_ok(second)
    for task in ("rs-chief-0", "rs-worker-0"):
        [restored] = second[task].of("restored")
        assert restored.step >= 10 and restored.step == restored.epoch * 20 + restored.step_in_epoch
    chief = second["rs-chief-0"]
    assert min(e.step for e in chief.of("step")) > 10  # no step was trained twice from scratch
    assert (tmp_path / "_tfcluster" / "run2" / "DONE").is_file()
    loss = curve(tmp_path / "tensorboard" / "train", "loss")  # one curve across both runs
    assert_monotonic(loss)
    assert [step for step, _ in loss] == list(range(2, 81, 2))


def test_pss_coordinator_exit_code_is_the_one_its_failed_event_names(tmp_path: Path) -> None:
    """A dead ps ends the coordinator with exactly the code of its ``failed`` event (175).

    The restart policies read the process exit code; the entrypoint leaves with
    ``os._exit`` so TF's teardown (seen aborting with SIGABRT once) cannot replace it.
    """
    spec = cluster_spec(
        "pk", {"chief": 1, "worker": 1, "ps": 1}, tmp_path,
        training={"epochs": 50, "steps_per_epoch": 10, "batch_size_per_replica": 32},
    )
    cluster = start_cluster(spec, "run1")
    wait_for_step(cluster, "pk-chief-0", 5)
    cluster.procs["pk-ps-0"].send_signal(signal.SIGKILL)
    chief = cluster.procs["pk-chief-0"]
    chief.wait(timeout=120)
    results = cluster.wait(timeout=1)
    [failed] = results["pk-chief-0"].of("failed")
    assert results["pk-chief-0"].returncode == failed.exit_code == 175, describe(results)


def test_custom_loop_restart_resumes_from_its_own_backup(tmp_path: Path) -> None:
    spec = cluster_spec(
        "cr", {"chief": 1}, tmp_path,
        checkpoint={"dir": str(tmp_path), "backup_every_steps": 5},
        training={"epochs": 4, "steps_per_epoch": 200, "batch_size_per_replica": 16, "loop": "custom"},
        tensorboard={"update_steps": 3},  # points after the last backup, which the resumed run trains again
    )  # 800 steps: a single task is fast, the kill must land mid-run
    first = start_cluster(spec, "run1")
    wait_for_step(first, "cr-chief-0", 51)  # the backup of step 50 precedes step 51
    first.kill()
    second = run_cluster(spec, "run2")
    assert_all_ok(second)
    chief = second["cr-chief-0"]
    [restored] = chief.of("restored")
    assert restored.step >= 50 and restored.step % 5 == 0
    assert min(e.step for e in chief.of("step")) > restored.step
    assert not list((tmp_path / "backup").rglob("*.index")), "backup left after success"
    loss = curve(tmp_path / "tensorboard" / "train", "loss")
    assert_monotonic(loss)
    assert [step for step, _ in loss] == sorted({*range(3, 801, 3), 200, 400, 600, 800})


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_a_task_lost_in_the_final_export_resumes_at_the_end_not_from_scratch(tmp_path: Path, loop: str) -> None:
    spec = cluster_spec("ex", {"chief": 1}, tmp_path,
                        training={"epochs": 2, "steps_per_epoch": 8, "batch_size_per_replica": 16, "loop": loop})
    blocker = tmp_path / "model" / "model.keras"
    blocker.mkdir(parents=True)  # the export fails after the last step, as when a peer or the ps is lost during it
    [first] = run_cluster(spec, "run1").values()
    assert first.returncode != 0 and first.of("failed") and first.of("step")[-1].step == 16, first.output[-2000:]
    blocker.rmdir()
    [second] = run_cluster(spec, "run2").values()
    assert second.returncode == 0, second.output[-2000:]
    assert [e.step for e in second.of("restored")] == [16] and not second.of("step")  # nothing trained twice
    assert Path(second.of("finished")[0].model_path).is_file()
    assert not list((tmp_path / "backup").rglob("*.index")), "backup left after success"


def test_missing_job_config_exits_2_with_a_failed_event() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TFCLUSTER_JOB", "TF_CONFIG")}
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.worker"], capture_output=True, text=True, timeout=120,
        env={**env, "TFCLUSTER_TASK_NAME": "t-0", "TFCLUSTER_EVENT_TOKEN": "t0k", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert proc.returncode == 2
    [failed] = [e for e in map(EventReader("t0k").parse, proc.stdout.split("\n")) if e and e.event == "failed"]
    assert failed.event == "failed" and "TFCLUSTER_JOB is not set" in failed.reason and failed.task == "t-0"


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_sigterm_to_a_worker_makes_every_task_save_the_same_step_and_a_restart_resumes_there(
    tmp_path: Path, loop: str
) -> None:
    """No periodic backup (every 1000 steps): only the coordinated save can keep the progress."""
    spec = cluster_spec(
        f"pre{loop[0]}", {"chief": 1, "worker": 1}, tmp_path,
        checkpoint={"dir": str(tmp_path), "backup_every_steps": 1000},
        training={"epochs": 3, "steps_per_epoch": 40, "batch_size_per_replica": 32, "loop": loop},
    )
    chief, worker = f"{spec.name}-chief-0", f"{spec.name}-worker-0"
    first = start_cluster(spec, "run1")
    wait_for_step(first, chief, 20)
    first.procs[worker].send_signal(signal.SIGTERM)
    results = first.wait(timeout=120)
    assert {r.returncode for r in results.values()} == {143}, describe(results)
    saved = {results[t].of("preempted")[0].step for t in (chief, worker)}
    assert len(saved) == 1 and 20 <= min(saved) < 120, saved
    [step] = saved
    assert not results[chief].of("failed")

    second = run_cluster(spec, "run2")
    assert_all_ok(second)
    for task in (chief, worker):
        [restored] = second[task].of("restored")
        assert restored.step == step, (restored, step)
    assert min(e.step for e in second[chief].of("step")) > step


def test_pss_sigterm_a_worker_exits_preempted_and_the_chief_saves_its_weights_before_it(tmp_path: Path) -> None:
    """ParameterServer: TensorFlow's handler does not apply; a worker just exits (the other carries on), the coordinator saves first."""
    spec = cluster_spec(
        "pst", {"chief": 1, "worker": 2, "ps": 1}, tmp_path,
        training={"epochs": 8, "steps_per_epoch": 20, "batch_size_per_replica": 32},
    )
    first = start_cluster(spec, "run1")
    try:
        wait_for_step(first, "pst-chief-0", 25)  # mid-epoch 1
        first.procs["pst-worker-0"].send_signal(signal.SIGTERM)
        assert first.procs["pst-worker-0"].wait(timeout=30) == 143
        first.procs["pst-chief-0"].send_signal(signal.SIGTERM)
        assert first.procs["pst-chief-0"].wait(timeout=120) == 143, first.output("pst-chief-0")[-3000:]
    finally:
        first.kill()
    chief = TaskResult(143, first.output("pst-chief-0"), first.plan.event_token)
    [preempted] = chief.of("preempted")
    # The weights of the epoch it was in (1 or later: the chief trains on while worker 0 exits), resumed at its start.
    epoch = len(chief.of("epoch"))
    assert epoch >= 1 and preempted.step == epoch * 20 and not chief.of("failed"), chief.output[-3000:]
    assert TaskResult(143, first.output("pst-worker-0"), first.plan.event_token).of("preempted")[0].step is None

    second = run_cluster(spec, "run2")
    assert_all_ok(second)
    [restored] = second["pst-chief-0"].of("restored")
    assert (restored.epoch, restored.step) == (epoch, epoch * 20)
