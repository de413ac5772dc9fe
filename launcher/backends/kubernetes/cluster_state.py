"""The supervisor pod's ``StateDir``: the plan, the published status and a stall's stacks live in the run's ConfigMap.

Contract: ``ClusterState(api, name, namespace)`` is a ``harness.StateDir`` in the pod's scratch space (its pid and
log files) whose ``read_plan`` plans the run again from the ConfigMap (``plan_of``), ``read_status`` and
``write_status`` read and write ``STATUS_KEY`` there (so ``status`` reads what the supervisor published, and a
replacement pod adopts from it), and ``keep_stacks`` is ``in_cluster.keep_stacks``. A write that meets a
concurrent change (409) reads the ConfigMap again and writes once more.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from launcher.backends.kubernetes import apply, in_cluster
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi
from launcher.backends.kubernetes.pods import JOB_KEY, SPEC_KEY, TMP_DIR
from launcher.backends.kubernetes.target import target
from launcher.errors import LaunchError
from launcher.plan.planner import Plan, make_plan
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import ClusterSpec
from launcher.supervision.harness import StateDir
from launcher.supervision.status import JobStatus

#: The run's ConfigMap key holding the status its supervisor last published (JSON, ``JobStatus.to_dict``).
STATUS_KEY = "status.json"


def plan_of(api: KubeApi, name: str, namespace: str) -> Plan:
    """The run's plan, made again from its ConfigMap (``SPEC_KEY``: the spec without its env values; ``JOB_KEY``:
    its run id) with its Jobs' event token; ``LaunchError`` for a run launched before the ConfigMap kept the spec."""
    config_map = apply.config_map(api, name, namespace)
    run_config = apply.record(config_map, JOB_KEY, RunConfig)
    try:
        spec = ClusterSpec.model_validate_json(config_map.get("data", {})[SPEC_KEY])
    except (KeyError, ValueError):
        raise LaunchError(f"{name!r} was launched by an older tfcluster whose ConfigMap keeps no spec; "
                          "launch it again") from None
    token = k8s_status.event_token(apply.of_cluster(api, Kind.JOB, namespace, name))
    return make_plan(spec, target(spec), run_config.run_id if run_config else "manual", event_token=token)


def published(api: KubeApi, name: str, namespace: str) -> JobStatus | None:
    """The status the run's supervisor last published, None before it did."""
    text = apply.config_map(api, name, namespace).get("data", {}).get(STATUS_KEY)
    return None if text is None else JobStatus.from_dict(json.loads(text))


class ClusterState(StateDir):
    """See the module contract."""

    def __init__(self, api: KubeApi, name: str, namespace: str):
        super().__init__(Path(TMP_DIR) / "tfcluster-supervisor" / name)
        self.root.mkdir(parents=True, exist_ok=True)
        self.api, self.name, self.namespace = api, name, namespace

    @classmethod
    def in_this_pod(cls, name: str) -> ClusterState:
        """The state of run ``name`` in this pod's namespace, with its ServiceAccount's token."""
        from launcher.backends.kubernetes.kubeapi import connect

        return cls(KubeApi(connect(None)), name, os.environ[in_cluster.NAMESPACE_ENV])

    def exists(self) -> bool:
        return True

    def read_plan(self) -> Plan:
        return plan_of(self.api, self.name, self.namespace)

    def read_status(self) -> JobStatus | None:
        return published(self.api, self.name, self.namespace)

    def write_status(self, status: JobStatus) -> None:
        text = json.dumps(status.to_dict())
        try:
            apply.write_data(self.api, apply.config_map(self.api, self.name, self.namespace), STATUS_KEY, text,
                             self.namespace)
        except LaunchError as exc:
            if "409" not in str(exc):
                raise
            apply.write_data(self.api, apply.config_map(self.api, self.name, self.namespace), STATUS_KEY, text,
                             self.namespace)

    def keep_stacks(self, number: int, dumps: Mapping[str, str | None]) -> str | None:
        return in_cluster.keep_stacks(self.api, self.namespace, lambda line: print(line, flush=True), self.name,
                                      number, dict(dumps))
