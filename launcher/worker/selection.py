"""What a task does and with which strategy: a pure function of RunConfig, TF_CONFIG and local GPUs.

Contract: ``select(run_config, tf_config, gpu_count)`` returns a ``Selection`` (a ``Duty``, what the task does:
EVALUATE, COORDINATE, SERVE or TRAIN, and a strategy); it imports no TensorFlow and never fails on a
plan made by ``launcher.plan``; a hand-made inconsistent config raises ``ConfigError`` naming the
field. ``is_lead``: the lead task (``launcher.protocol.roles.lead_task``) or a task without a cluster;
only the lead writes checkpoints, the model and the marker. An evaluator EVALUATEs (default
strategy); under ``parameter_server`` the chief COORDINATEs and ps and workers SERVE until the DONE
marker; every other task TRAINs with its strategy (``auto``: mirrored with >1 GPU, one_device with 1,
default on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from launcher.protocol.roles import TaskRef, lead_task
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import Collective, RoleType, Strategy, TPUSpec
from launcher.worker.task_errors import ConfigError


class Duty(str, Enum):
    TRAIN = "train"  # run the training loop (every MWMS task, or the single task)
    COORDINATE = "coordinate"  # PSS chief: drive training through a ClusterCoordinator
    SERVE = "serve"  # PSS ps / worker: run a tf.distribute.Server until DONE
    EVALUATE = "evaluate"  # evaluator sidecar


@dataclass(frozen=True)
class Selection:
    duty: Duty
    strategy: Strategy  # never AUTO
    role: RoleType | None  # None: no cluster (single process)
    index: int
    is_lead: bool
    collective: Collective = Collective.AUTO
    tpu: TPUSpec | None = None


MULTI_WORKER = frozenset({Strategy.MULTI_WORKER_MIRRORED, Strategy.PARAMETER_SERVER})


def select(run_config: RunConfig, tf_config: dict[str, Any], gpu_count: int) -> Selection:
    role, index = _task(tf_config)
    cluster = tf_config.get("cluster", {})
    is_lead = role is None or TaskRef(role, index) == lead_task(r for r in RoleType if cluster.get(r.value))
    strategy = run_config.strategy
    if strategy is Strategy.AUTO:
        strategy = Strategy.MIRRORED if gpu_count > 1 else Strategy.ONE_DEVICE if gpu_count == 1 else Strategy.DEFAULT
    if strategy in MULTI_WORKER and role is None:
        raise ConfigError(f"strategy {strategy.value} needs TF_CONFIG naming this task's cluster and role")
    if role is RoleType.EVALUATOR:
        return Selection(Duty.EVALUATE, Strategy.DEFAULT, role, index, is_lead=False)
    if strategy is Strategy.PARAMETER_SERVER:
        duty = Duty.COORDINATE if role is RoleType.CHIEF else Duty.SERVE
        return Selection(duty, strategy, role, index, is_lead)
    if role is RoleType.PS:
        raise ConfigError(f"a ps task only exists under parameter_server, not {strategy.value}")
    return Selection(Duty.TRAIN, strategy, role, index, is_lead, run_config.collective, run_config.tpu)


def _task(tf_config: Any) -> tuple[RoleType | None, int]:
    """This task's role and index after checking TF_CONFIG is consistent; (None, 0) without a task."""
    if not isinstance(tf_config, dict):
        raise ConfigError(f"TF_CONFIG must be a JSON object with cluster and task, got {type(tf_config).__name__}")
    cluster = _cluster(tf_config.get("cluster", {}))
    task = tf_config.get("task")
    if not task:
        return None, 0
    try:
        role, index = RoleType(task["type"]), task.get("index", 0)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ConfigError(f"TF_CONFIG task must be {{'type': chief|worker|ps|evaluator, 'index': n}}, got {task!r}") from None
    if isinstance(index, bool) or not isinstance(index, int):
        raise ConfigError(f"TF_CONFIG task.index must be an integer, got {index!r}")
    if role.value not in cluster and role is not RoleType.EVALUATOR:
        raise ConfigError(f"TF_CONFIG task.type {role.value} is not in cluster (roles: {', '.join(cluster) or 'none'})")
    members = cluster.get(role.value)
    if index < 0 or (members is not None and index >= len(members)):
        size = "no" if members is None else len(members)
        raise ConfigError(f"TF_CONFIG task.index {index} is out of range: cluster has {size} {role.value} task(s)")
    return role, index


def _cluster(cluster: Any) -> dict[str, list[str]]:
    if not isinstance(cluster, dict):
        raise ConfigError(f"TF_CONFIG cluster must be an object of role -> list of host:port, got {type(cluster).__name__}")
    for role, members in cluster.items():
        if not isinstance(members, list):
            raise ConfigError(f"TF_CONFIG cluster.{role} must be a list of 'host:port', got {members!r}")
        if not all(_is_host_port(member) for member in members):
            raise ConfigError(f"TF_CONFIG cluster.{role} must be a list of 'host:port' strings, got {members!r}")
    return cluster


def _is_host_port(member: Any) -> bool:
    if not isinstance(member, str):
        return False
    host, _, port = member.rpartition(":")
    return bool(host) and port.isdigit()


def leader_address(tf_config: dict[str, Any]) -> str | None:
    """The host:port of the group's leader as MultiWorkerMirrored has it (its coordination service and collective
    group leader: chief 0, else worker 0); None for the leader itself, or a cluster with neither."""
    role, index = _task(tf_config)
    cluster = tf_config.get("cluster", {})
    leader = RoleType.CHIEF if cluster.get(RoleType.CHIEF.value) else RoleType.WORKER
    if not cluster.get(leader.value) or (role is leader and index == 0):
        return None
    return str(cluster[leader.value][0])


def peer_addresses(tf_config: dict[str, Any]) -> list[str]:
    """Every host:port of the cluster except this task's own."""
    role, index = _task(tf_config)
    cluster = tf_config.get("cluster", {})
    own = cluster[role.value][index] if role is not None and role.value in cluster else None
    return [a for members in cluster.values() for a in members if a != own]
