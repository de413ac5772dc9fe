"""In-process pieces of the entrypoint that need TensorFlow but no cluster."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

pytestmark = pytest.mark.tf  # imports TensorFlow: not in the fast lane
tf = require_module("tensorflow")
tf_keras = require_module("tf_keras")

import numpy as np  # noqa: E402  (TensorFlow's dependency: imported after its check, so the fast lane collects this module)

from launcher.examples.digits import synthetic_digits  # noqa: E402
from launcher.spec.models import Strategy, TPUSpec, TrainingLoop, TrainingSpec  # noqa: E402
from launcher.worker import data, usercode  # noqa: E402
from launcher.worker.restore import ResumePoint, resume_point  # noqa: E402
from launcher.worker.selection import Duty, Selection  # noqa: E402
from launcher.worker.strategies import build_strategy, tpu_resolver_kwargs  # noqa: E402
from launcher.worker.task_errors import ConfigError  # noqa: E402

Policy = tf.data.experimental.AutoShardPolicy


def single(strategy: Strategy, tpu: TPUSpec | None = None) -> Selection:
    return Selection(Duty.TRAIN, strategy, None, 0, True, tpu=tpu)


@pytest.mark.parametrize(
    ("strategy", "class_name"),
    [
        (Strategy.DEFAULT, "_DefaultDistributionStrategy"),
        (Strategy.ONE_DEVICE, "OneDeviceStrategy"),
        (Strategy.MIRRORED, "MirroredStrategy"),
        (Strategy.CENTRAL_STORAGE, "CentralStorageStrategy"),
    ],
)
def test_single_task_strategies_build(strategy: Strategy, class_name: str) -> None:
    built = build_strategy(single(strategy))
    assert type(built).__name__ == class_name
    assert built.num_replicas_in_sync == 1


@pytest.mark.parametrize(
    ("tpu", "kwargs"),
    [
        (TPUSpec(name="t1", zone="us-central1-b", project="p"), {"tpu": "t1", "zone": "us-central1-b", "project": "p"}),
        (TPUSpec(address="grpc://10.0.0.2:8470"), {"tpu": "grpc://10.0.0.2:8470"}),
    ],
)
def test_tpu_resolver_gets_name_zone_project_or_address(tpu: TPUSpec, kwargs: dict) -> None:
    calls = []

    class Reached(Exception):
        pass

    def resolver(**given):
        calls.append(given)
        raise Reached

    with pytest.raises(Reached):
        build_strategy(single(Strategy.TPU, tpu), tpu_resolver=resolver)
    assert calls == [kwargs]


def test_tpu_without_name_or_address_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="tpu.name or tpu.address"):
        tpu_resolver_kwargs(TPUSpec(zone="z"))


@pytest.mark.parametrize(("files", "workers", "policy"), [(None, 2, Policy.DATA), (1, 2, Policy.DATA), (2, 2, Policy.FILE), (8, 3, Policy.FILE)])
def test_shard_policy(files: int | None, workers: int, policy) -> None:
    assert data.shard_policy(files, workers) == policy


def test_finalize_sets_data_unless_the_user_chose() -> None:
    plain = tf.data.Dataset.range(4)
    assert data.finalize(plain).options().experimental_distribute.auto_shard_policy == Policy.DATA
    by_files = data.shard_by_files(plain, num_files=4, num_workers=2)
    assert data.finalize(by_files).options().experimental_distribute.auto_shard_policy == Policy.FILE


@pytest.mark.parametrize(("save_freq", "steps_done", "expected"),
                         [(3, 7, ResumePoint(1, 1, 6)), (5, 11, ResumePoint(2, 0, 10)), ("epoch", 7, ResumePoint(1, 0, 5))])
def test_resume_point_matches_tf_keras_backup(tmp_path, save_freq, steps_done: int, expected: ResumePoint) -> None:
    """Interrupt a real BackupAndRestore fit after ``steps_done`` steps (5 per epoch) and read its backup."""

    class Interrupt(tf_keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model._train_counter.numpy() >= steps_done:
                raise RuntimeError("interrupted")

    model = tf_keras.Sequential([tf_keras.layers.Input(shape=(2,)), tf_keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    inputs = tf.data.Dataset.from_tensors((tf.zeros([4, 2]), tf.zeros([4, 1]))).repeat()
    backup = tf_keras.callbacks.BackupAndRestore(str(tmp_path), save_freq=save_freq, delete_checkpoint=False)
    with pytest.raises(RuntimeError, match="interrupted"):
        model.fit(inputs, epochs=3, steps_per_epoch=5, callbacks=[backup, Interrupt()], verbose=0)
    assert resume_point(str(tmp_path), steps_per_epoch=5, step_granular=save_freq != "epoch") == expected


def test_no_backup_no_resume_point(tmp_path) -> None:
    assert resume_point(str(tmp_path), 5, True) is None


def test_user_module_contract_is_checked() -> None:
    with pytest.raises(ConfigError, match="cannot import 'no_such_module_xyz'"):
        usercode.load(TrainingSpec(module="no_such_module_xyz"))
    with pytest.raises(ConfigError, match="lacks build_model, make_dataset"):
        usercode.load(TrainingSpec(module="json"))
    loaded = usercode.load(TrainingSpec(loop=TrainingLoop.CUSTOM, args={"seed": 3}))
    assert loaded.train_step is not None and loaded.has_eval_dataset and loaded.args == {"seed": 3}


def test_synthetic_digits_are_deterministic_and_balanced() -> None:
    images, labels = synthetic_digits(2000, seed=5)
    again, _ = synthetic_digits(2000, seed=5)
    other, _ = synthetic_digits(2000, seed=6)
    assert images.shape == (2000, 28, 28) and images.dtype == np.uint8
    assert np.array_equal(images, again) and not np.array_equal(images, other)
    assert np.bincount(labels, minlength=10).min() > 150
