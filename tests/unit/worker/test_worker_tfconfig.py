"""TF_CONFIG sources of the entrypoint: the variable itself, or the shared cluster file (Kubernetes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.worker.task_errors import ConfigError
from launcher.worker.tfconfig import resolve_tf_config

CLUSTER = {"chief": ["c-chief-0.c:2222"], "worker": ["c-worker-0.c:2222", "c-worker-1.c:2222"], "ps": ["c-ps-0.c:2222"]}


@pytest.fixture
def cluster_file(tmp_path: Path) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    return str(path)


def test_tf_config_variable_wins_over_the_file(cluster_file: str) -> None:
    explicit = {"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}
    env = {"TF_CONFIG": json.dumps(explicit), "TFCLUSTER_CLUSTER_FILE": cluster_file, "TFCLUSTER_TASK_TYPE": "ps"}
    assert resolve_tf_config(env) == explicit


def test_no_source_means_no_cluster() -> None:
    assert resolve_tf_config({}) == {}


@pytest.mark.parametrize(
    ("extra", "task"),
    [
        ({"TFCLUSTER_TASK_TYPE": "worker", "JOB_COMPLETION_INDEX": "1"}, {"type": "worker", "index": 1}),
        ({"TFCLUSTER_TASK_TYPE": "worker", "TFCLUSTER_TASK_INDEX": "0", "JOB_COMPLETION_INDEX": "1"}, {"type": "worker", "index": 0}),
        ({"TFCLUSTER_TASK_TYPE": "chief"}, {"type": "chief", "index": 0}),
        ({"TFCLUSTER_TASK_TYPE": "ps", "JOB_COMPLETION_INDEX": "0"}, {"type": "ps", "index": 0}),
    ],
)
def test_training_task_gets_the_shared_cluster(cluster_file: str, extra: dict[str, str], task: dict) -> None:
    env = {"TFCLUSTER_CLUSTER_FILE": cluster_file, **extra}
    assert resolve_tf_config(env) == {"cluster": CLUSTER, "task": task}


def test_evaluator_names_only_itself(cluster_file: str) -> None:
    env = {"TFCLUSTER_CLUSTER_FILE": cluster_file, "TFCLUSTER_TASK_TYPE": "evaluator", "TFCLUSTER_TASK_ADDRESS": "c-evaluator-0.c:2222"}
    assert resolve_tf_config(env) == {"cluster": {"evaluator": ["c-evaluator-0.c:2222"]}, "task": {"type": "evaluator", "index": 0}}


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        ({"TFCLUSTER_TASK_TYPE": "boss"}, "TFCLUSTER_TASK_TYPE"),
        ({"TFCLUSTER_TASK_TYPE": "worker"}, "JOB_COMPLETION_INDEX"),
        ({"TFCLUSTER_TASK_TYPE": "worker", "JOB_COMPLETION_INDEX": "-1"}, "JOB_COMPLETION_INDEX"),
        ({"TFCLUSTER_TASK_TYPE": "worker", "TFCLUSTER_TASK_INDEX": "2"}, "index 2"),
        ({"TFCLUSTER_TASK_TYPE": "evaluator"}, "TFCLUSTER_TASK_ADDRESS"),
    ],
)
def test_bad_task_settings_name_the_variable(cluster_file: str, extra: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        resolve_tf_config({"TFCLUSTER_CLUSTER_FILE": cluster_file, **extra})


def test_unreadable_or_malformed_file_is_a_config_error(tmp_path: Path) -> None:
    base = {"TFCLUSTER_TASK_TYPE": "chief"}
    with pytest.raises(ConfigError, match="cannot read"):
        resolve_tf_config({**base, "TFCLUSTER_CLUSTER_FILE": str(tmp_path / "missing.json")})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        resolve_tf_config({**base, "TFCLUSTER_CLUSTER_FILE": str(bad)})
    bad.write_text(json.dumps({"chief": "a:1"}))
    with pytest.raises(ConfigError, match="cluster dict"):
        resolve_tf_config({**base, "TFCLUSTER_CLUSTER_FILE": str(bad)})


def test_malformed_tf_config_variable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="TF_CONFIG is not valid JSON"):
        resolve_tf_config({"TF_CONFIG": "{"})
