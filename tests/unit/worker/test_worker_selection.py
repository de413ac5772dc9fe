"""What each task does and which strategy it builds: every branch of the pure selection."""

from __future__ import annotations

import pytest

from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import Collective, RoleType, Strategy, TPUSpec
from launcher.worker.selection import Duty, peer_addresses, select
from launcher.worker.task_errors import ConfigError

MWMS_CLUSTER = {"chief": ["h-c:1"], "worker": ["h-w0:1", "h-w1:1"]}
PSS_CLUSTER = {"chief": ["h-c:1"], "worker": ["h-w0:1"], "ps": ["h-p0:1"]}


def run_config(strategy: Strategy, **fields) -> RunConfig:
    return RunConfig(name="c", run_id="r", strategy=strategy, checkpoint_dir="/ckpt", **fields)


def tf_config(cluster: dict, role: str, index: int = 0) -> dict:
    return {"cluster": cluster, "task": {"type": role, "index": index}}


@pytest.mark.parametrize(("gpus", "expected"), [(0, Strategy.DEFAULT), (1, Strategy.ONE_DEVICE), (2, Strategy.MIRRORED), (8, Strategy.MIRRORED)])
def test_auto_single_task_follows_local_gpus(gpus: int, expected: Strategy) -> None:
    selection = select(run_config(Strategy.AUTO), {}, gpus)
    assert (selection.duty, selection.strategy, selection.is_lead, selection.role) == (Duty.TRAIN, expected, True, None)


@pytest.mark.parametrize("strategy", [Strategy.MIRRORED, Strategy.ONE_DEVICE, Strategy.DEFAULT, Strategy.CENTRAL_STORAGE])
def test_explicit_single_task_strategies_are_kept(strategy: Strategy) -> None:
    assert select(run_config(strategy), {}, 4).strategy is strategy


def test_tpu_carries_its_resolver_settings() -> None:
    tpu = TPUSpec(name="my-tpu", zone="us-central1-b", project="p")
    selection = select(run_config(Strategy.TPU, tpu=tpu), {}, 0)
    assert (selection.duty, selection.strategy, selection.tpu) == (Duty.TRAIN, Strategy.TPU, tpu)


@pytest.mark.parametrize(("role", "index", "is_lead"), [("chief", 0, True), ("worker", 0, False), ("worker", 1, False)])
@pytest.mark.parametrize("collective", list(Collective))
def test_mwms_every_task_trains_with_the_collective(role: str, index: int, is_lead: bool, collective: Collective) -> None:
    selection = select(run_config(Strategy.MULTI_WORKER_MIRRORED, collective=collective), tf_config(MWMS_CLUSTER, role, index), 0)
    assert (selection.duty, selection.strategy, selection.is_lead) == (Duty.TRAIN, Strategy.MULTI_WORKER_MIRRORED, is_lead)
    assert selection.collective is collective
    assert (selection.role, selection.index) == (RoleType(role), index)


def test_worker_zero_is_chief_when_there_is_no_chief() -> None:
    cluster = {"worker": ["h-w0:1", "h-w1:1"]}
    config = run_config(Strategy.MULTI_WORKER_MIRRORED)
    assert select(config, tf_config(cluster, "worker", 0), 0).is_lead
    assert not select(config, tf_config(cluster, "worker", 1), 0).is_lead


@pytest.mark.parametrize(("role", "duty"), [("chief", Duty.COORDINATE), ("worker", Duty.SERVE), ("ps", Duty.SERVE)])
def test_pss_chief_coordinates_and_the_others_serve(role: str, duty: Duty) -> None:
    selection = select(run_config(Strategy.PARAMETER_SERVER), tf_config(PSS_CLUSTER, role), 0)
    assert (selection.duty, selection.strategy, selection.is_lead) == (duty, Strategy.PARAMETER_SERVER, role == "chief")


@pytest.mark.parametrize("strategy", [Strategy.PARAMETER_SERVER, Strategy.MULTI_WORKER_MIRRORED, Strategy.AUTO])
def test_evaluator_evaluates_with_the_default_strategy(strategy: Strategy) -> None:
    selection = select(run_config(strategy), tf_config({"evaluator": ["h-e:1"]}, "evaluator"), 0)
    assert (selection.duty, selection.strategy, selection.is_lead) == (Duty.EVALUATE, Strategy.DEFAULT, False)


def test_multi_worker_strategy_without_tf_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="multi_worker_mirrored needs TF_CONFIG"):
        select(run_config(Strategy.MULTI_WORKER_MIRRORED), {}, 0)


def test_ps_outside_parameter_server_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ps task"):
        select(run_config(Strategy.MULTI_WORKER_MIRRORED), tf_config(PSS_CLUSTER, "ps"), 0)


def test_malformed_task_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="TF_CONFIG task"):
        select(run_config(Strategy.AUTO), {"cluster": {}, "task": {"type": "boss"}}, 0)


def test_peers_are_everyone_but_me() -> None:
    assert peer_addresses(tf_config(MWMS_CLUSTER, "worker", 1)) == ["h-c:1", "h-w0:1"]
    assert peer_addresses({}) == []


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ([], "TF_CONFIG must be a JSON object"),
        ("chief", "TF_CONFIG must be a JSON object"),
        ({"cluster": [], "task": {"type": "chief"}}, "TF_CONFIG cluster must be"),
        ({"cluster": {"chief": "h-c:1"}, "task": {"type": "chief"}}, "TF_CONFIG cluster.chief must be a list"),
        ({"cluster": {"chief": [1]}, "task": {"type": "chief"}}, "TF_CONFIG cluster.chief must be a list of 'host:port'"),
        ({"cluster": {"chief": ["h-c"]}, "task": {"type": "chief"}}, "TF_CONFIG cluster.chief must be a list of 'host:port'"),
        ({"cluster": {"chief": ["h-c:port"]}, "task": {"type": "chief"}}, "TF_CONFIG cluster.chief must be a list of 'host:port'"),
        ({"cluster": MWMS_CLUSTER, "task": "chief"}, "TF_CONFIG task must be"),
        ({"cluster": MWMS_CLUSTER, "task": {"type": "worker", "index": -1}}, "TF_CONFIG task.index -1"),
        ({"cluster": MWMS_CLUSTER, "task": {"type": "worker", "index": 2}}, r"TF_CONFIG task.index 2 .*2 worker"),
        ({"cluster": MWMS_CLUSTER, "task": {"type": "worker", "index": "1"}}, "TF_CONFIG task.index must be an integer"),
        ({"cluster": MWMS_CLUSTER, "task": {"type": "worker", "index": True}}, "TF_CONFIG task.index must be an integer"),
        ({"cluster": MWMS_CLUSTER, "task": {"type": "ps", "index": 0}}, "TF_CONFIG task.type ps is not in cluster"),
        ({"cluster": {"evaluator": ["h-e:1"]}, "task": {"type": "evaluator", "index": 1}}, "TF_CONFIG task.index 1"),
    ],
)
def test_inconsistent_tf_config_is_a_config_error_naming_the_field(config, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        select(run_config(Strategy.MULTI_WORKER_MIRRORED), config, 0)
    with pytest.raises(ConfigError, match=field):
        peer_addresses(config)


def test_an_evaluator_may_be_outside_its_cluster() -> None:
    """TF's convention: the evaluator need not be listed; tfcluster's plans list it alone."""
    selection = select(run_config(Strategy.MULTI_WORKER_MIRRORED), tf_config(MWMS_CLUSTER, "evaluator"), 0)
    assert selection.duty is Duty.EVALUATE


def test_ipv6_addresses_are_host_port() -> None:
    assert peer_addresses(tf_config({"worker": ["[::1]:2222", "[::1]:2223"]}, "worker", 0)) == ["[::1]:2223"]
