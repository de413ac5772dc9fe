"""TensorFlow is the oracle: every planned TF_CONFIG must be accepted by TF's own resolver and validators."""

from __future__ import annotations

import itertools
import json

import pytest

from helpers.required import require_module
from launcher.api import plan, validate_data
from launcher.plan.targets import BackendKind
from launcher.spec.models import RoleType

pytestmark = pytest.mark.tf  # imports TensorFlow: not in the fast lane
tf_resolver = require_module("tensorflow.python.distribute.cluster_resolver.tfconfig_cluster_resolver")
from tensorflow.python.distribute import multi_worker_util  # noqa: E402

WORKER_COUNTS = [1, 2, 3, 8, 64]
MIXES = [
    # (chief, ps, evaluator)
    (c, p, e)
    for c, p, e in itertools.product([0, 1], [0, 1, 3], [0, 1])
    if not (p and not c)  # parameter_server needs a chief
]


def _spec(chief: int, workers: int, ps: int, evaluator: int) -> dict:
    roles = {"worker": {"replicas": workers}}
    for role, n in (("chief", chief), ("ps", ps), ("evaluator", evaluator)):
        if n:
            roles[role] = {"replicas": n}
    return {"name": "oracle", "roles": roles}


@pytest.mark.parametrize("backend", list(BackendKind))
@pytest.mark.parametrize("workers", WORKER_COUNTS)
@pytest.mark.parametrize(("chief", "ps", "evaluator"), MIXES)
def test_tensorflow_accepts_every_tf_config(
    backend: BackendKind, workers: int, chief: int, ps: int, evaluator: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = plan(validate_data(_spec(chief, workers, ps, evaluator)), backend)
    training_workers = chief + workers
    for task in result.tasks:
        monkeypatch.setenv("TF_CONFIG", plan_env_tf_config(result, task))
        resolver = tf_resolver.TFConfigClusterResolver()
        cluster_spec = resolver.cluster_spec()
        assert (resolver.task_type, resolver.task_id) == (task.type.value, task.index)
        multi_worker_util._validate_cluster_spec(cluster_spec, resolver.task_type, resolver.task_id)
        jobs = cluster_spec.as_dict()
        if task.type is RoleType.EVALUATOR:
            assert jobs == {"evaluator": [task.address]}
            continue
        assert "evaluator" not in jobs
        assert len(jobs.get("worker", [])) == workers and len(jobs.get("ps", [])) == ps
        assert cluster_spec.task_address(task.type.value, task.index) == task.address
        if task.type is not RoleType.PS:
            assert multi_worker_util.worker_count(cluster_spec, task.type.value) == training_workers
            expected_chief = task.type is RoleType.CHIEF or (chief == 0 and task.index == 0)
            assert multi_worker_util.is_chief(cluster_spec, task.type.value, task.index) == expected_chief


def plan_env_tf_config(result, task) -> str:
    """TF_CONFIG exactly as the backend would put it in the task's environment."""
    value = result.task_env(task)["TF_CONFIG"]
    assert json.loads(value) == result.tf_config(task)
    return value

