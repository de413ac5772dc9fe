"""Where a task's TF_CONFIG comes from: the ``TF_CONFIG`` variable, or a shared cluster file.

Contract: ``resolve_tf_config(environ)`` returns the TF_CONFIG dict
(``{"cluster": {...}, "task": {"type", "index"}}``) or ``{}`` for a task
outside any cluster. When ``TF_CONFIG`` is unset it is built from:

- ``TFCLUSTER_CLUSTER_FILE``: path of a JSON file holding the training
  ``cluster`` dict (one file for all tasks, e.g. a ConfigMap, so a 1,000
  worker manifest does not embed 1,000 TF_CONFIGs);
- ``TFCLUSTER_TASK_TYPE``: chief, worker, ps or evaluator;
- ``TFCLUSTER_TASK_INDEX``, else ``JOB_COMPLETION_INDEX`` (Kubernetes Indexed
  Jobs), else 0 for chief/evaluator;
- ``TFCLUSTER_TASK_ADDRESS``: the evaluator's own address; an evaluator's
  cluster is ``{"evaluator": [address]}``, never the training cluster.

Errors are ``ConfigError`` naming the variable. Pure: no TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.protocol import env
from launcher.spec.models import RoleType
from launcher.worker.task_errors import ConfigError

TF_CONFIG_ENV = env.TF_CONFIG
CLUSTER_FILE_ENV = env.CLUSTER_FILE
TASK_TYPE_ENV = env.TASK_TYPE
TASK_INDEX_ENV = env.TASK_INDEX
JOB_INDEX_ENV = env.JOB_COMPLETION_INDEX
TASK_ADDRESS_ENV = env.TASK_ADDRESS

SINGLETON_ROLES = (RoleType.CHIEF, RoleType.EVALUATOR)


def resolve_tf_config(environ: Mapping[str, str]) -> dict[str, Any]:
    raw = environ.get(TF_CONFIG_ENV)
    if raw:
        return _parse_json(raw, TF_CONFIG_ENV)
    if CLUSTER_FILE_ENV not in environ:
        return {}
    return _from_cluster_file(environ)


def _from_cluster_file(environ: Mapping[str, str]) -> dict[str, Any]:
    role = _task_type(environ)
    index = _task_index(environ, role)
    if role is RoleType.EVALUATOR:
        address = environ.get(TASK_ADDRESS_ENV)
        if not address:
            raise ConfigError(f"{TASK_ADDRESS_ENV} must give the evaluator's own host:port")
        return {"cluster": {"evaluator": [address]}, "task": {"type": role.value, "index": index}}
    path = environ[CLUSTER_FILE_ENV]
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{CLUSTER_FILE_ENV}: cannot read {path!r}: {exc.strerror}") from None
    cluster = _parse_json(text, f"{CLUSTER_FILE_ENV} ({path})")
    if not isinstance(cluster, dict) or not all(isinstance(v, list) for v in cluster.values()):
        raise ConfigError(f"{CLUSTER_FILE_ENV} ({path}) must hold a cluster dict: role -> list of host:port")
    members = cluster.get(role.value, [])
    if index >= len(members):
        raise ConfigError(
            f"{TASK_TYPE_ENV}={role.value} index {index} is not in {CLUSTER_FILE_ENV} "
            f"({len(members)} {role.value} task(s))"
        )
    return {"cluster": cluster, "task": {"type": role.value, "index": index}}


def _task_type(environ: Mapping[str, str]) -> RoleType:
    value = environ.get(TASK_TYPE_ENV, "")
    try:
        return RoleType(value)
    except ValueError:
        choices = ", ".join(r.value for r in RoleType)
        raise ConfigError(f"{TASK_TYPE_ENV} must be one of {choices} (got {value!r})") from None


def _task_index(environ: Mapping[str, str], role: RoleType) -> int:
    for name in (TASK_INDEX_ENV, JOB_INDEX_ENV):
        if name in environ:
            value = environ[name]
            if not value.isdigit():
                raise ConfigError(f"{name} must be a non-negative integer (got {value!r})")
            return int(value)
    if role in SINGLETON_ROLES:
        return 0
    raise ConfigError(f"{TASK_INDEX_ENV} or {JOB_INDEX_ENV} must give the index of this {role.value}")


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc.msg} at position {exc.pos}") from None
