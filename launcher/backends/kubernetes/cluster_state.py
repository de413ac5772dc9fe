"""The run's record in its ConfigMap: the plan, the published status and a stall's stacks (Kubernetes' ``RunStore``).

Contract: ``ConfigMapStore(api, name, namespace, in_pod)`` is a ``launcher.supervision.run_store.RunStore`` whose
``read_plan`` plans the run again from the ConfigMap (``plan_of``), ``read_status`` and ``write_status`` read and
write ``STATUS_KEY`` there (so ``status`` reads what the supervisor published, and a replacement pod adopts from it;
``status_text``: the status in the room the ConfigMap's other keys leave, its free texts cut shorter,
``STATUS_TEXT_CHARS``, until it fits, so no write exceeds the ConfigMap's 1 MiB), and ``keep_stacks`` writes a
stall's stacks to the supervisor's log and, bounded, to the ConfigMap (``STACKS_KEY``: the latest stall's, at most
``STACKS_BYTES``, each task's cut to its share), which outlive the pod and ``down`` deletes (``apply.write_data``: a
concurrent change is read again and written once more). The supervisor process's own files are a ``StateDir``
apart: in the pod's scratch space (``pod_state``), or the launching machine's state dir.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes import status as k8s_status
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.backends.kubernetes.manifests import CONFIG_MAP_LIMIT
from launcher.backends.kubernetes.pods import JOB_KEY, SPEC_KEY, TMP_DIR
from launcher.backends.kubernetes.target import target
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan, make_plan
from launcher.protocol.events import MANUAL_TOKEN
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import ClusterSpec
from launcher.supervision.harness import StateDir
from launcher.supervision.stack_dumps import bounded_text
from launcher.supervision.status import JobStatus

#: The environment the supervisor Job gives its pod (the downward API).
NAMESPACE_ENV, POD_ENV = "TFCLUSTER_NAMESPACE", "TFCLUSTER_POD"
#: The run's ConfigMap key holding the latest stall's stacks (a plain text: kubectl prints it as it is).
STACKS_KEY = "stacks"
#: At most this many bytes of stacks in the ConfigMap (which holds 1 MiB in all, the run's description first).
STACKS_BYTES = 256 * 1024
#: Room left in the ConfigMap for its metadata and the status the supervisor publishes.
RECORDS_BYTES = 16 * 1024


log = logging.getLogger(__name__)

#: A status that moved only the run's progress on is written at most this often.
PROGRESS_WRITE_SECONDS = 2.0
#: The run's ConfigMap key holding the status its supervisor last published (JSON, ``JobStatus.to_dict``).
STATUS_KEY = "status.json"
#: The lengths a status's free texts are cut to, in turn, until it fits its room (``JobStatus.abridged``).
STATUS_TEXT_CHARS = (1000, 200, 40, 0)


def data_bytes(data: Mapping[str, str]) -> int:
    """The size of a ConfigMap's ``data`` as the API server bounds it (``CONFIG_MAP_LIMIT``): its keys and values."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def status_text(status: JobStatus, room: int) -> str:
    """``status`` as JSON in at most ``room`` bytes (see the module contract); ``LaunchError`` if even its shortest
    form does not fit."""
    for form in (status, *(status.abridged(chars) for chars in STATUS_TEXT_CHARS)):
        text = json.dumps(form.to_dict())
        if len(text.encode()) <= room:
            return text
    raise LaunchError(f"the status ({len(text.encode())} bytes at its shortest) does not fit the {max(room, 0)} "
                      "bytes the run's ConfigMap has left")


def plan_of(api: KubeApi, name: str, namespace: str) -> Plan:
    """The run's plan, made again from its ConfigMap (``planned_again``) with its Jobs' event token."""
    config_map = apply.config_map(api, name, namespace)
    token = k8s_status.event_token(apply.of_cluster(api, Kind.JOB, namespace, name))
    return planned_again(name, config_map, token)


def planned_again(name: str, config_map: Obj, event_token: str = MANUAL_TOKEN) -> Plan:
    """Run ``name``'s plan, made again from its ``config_map`` (``SPEC_KEY``: the spec without its env values;
    ``JOB_KEY``: its run id); ``LaunchError`` for a run launched before the ConfigMap kept the spec, or a spec
    of another run (anyone who may write the ConfigMap could have put it there)."""
    run_config = apply.record(config_map, JOB_KEY, RunConfig)
    try:
        spec = ClusterSpec.model_validate_json(config_map.get("data", {})[SPEC_KEY])
    except (KeyError, ValueError):
        raise LaunchError(f"{name!r} was launched by an older tfcluster whose ConfigMap keeps no spec; "
                          "launch it again") from None
    if spec.name != name:
        raise LaunchError(f"ConfigMap {naming.config_map_name(name)} holds the spec of {spec.name!r}, not of {name!r}: "
                          "refusing it (edited after the launch?)")
    return make_plan(spec, target(spec), run_config.run_id if run_config else "manual", event_token=event_token)


def _shape(status: JobStatus) -> tuple[object, ...]:
    """What a status says besides its progress: a change of it is written at once."""
    return (status.state, status.message, status.restarts, status.preemptions, status.stall,
            tuple((task.name, task.state, task.exit_code, task.message) for task in status.tasks))


def published(config_map: Obj) -> JobStatus | None:
    """The status the run's supervisor last published in its ``config_map``, None before it did."""
    text = config_map.get("data", {}).get(STATUS_KEY)
    return None if text is None else JobStatus.from_dict(json.loads(text))


def keep_stacks(api: KubeApi, namespace: str, say: Callable[[str], None], name: str, number: int,
                dumps: dict[str, str | None]) -> str | None:
    """A stall's stacks, into this pod's log (``say``: the harness's) and, bounded, into the run's ConfigMap under
    ``STACKS_KEY`` (the previous stall's replaced); returns where to read them (a kubectl line)."""
    for task, dump in dumps.items():
        say(f"stacks of {task} at stall {number}:\n{dump or '(none: the task gave no dump)'}")
    pod = os.environ.get(POD_ENV, naming.supervisor_name(name))
    in_log = f"the log of pod {pod} (kubectl logs {pod})"
    try:
        config_map = apply.config_map(api, name, namespace)
        others = data_bytes({k: v for k, v in config_map.get("data", {}).items() if k != STACKS_KEY})
        room = min(STACKS_BYTES, CONFIG_MAP_LIMIT - RECORDS_BYTES - others)
        if room <= 0:
            return in_log  # the run's description leaves no room: the log only
        apply.write_data(api, config_map, STACKS_KEY, bounded_text(number, dumps, room), namespace)
    except LaunchError as exc:
        say(f"tfcluster: the stacks of stall {number} are in this log only: {exc}")
        return in_log
    cm = config_map["metadata"]["name"]
    return (f"ConfigMap {cm} key {STACKS_KEY} (kubectl get configmap {cm} -n {namespace} "
            f"-o jsonpath='{{.data.{STACKS_KEY}}}'; at most {room // 1024} KiB, each task's cut to its share) "
            f"and {in_log}")


class ConfigMapStore:
    """The run's ``RunStore`` in its ConfigMap (see the module contract)."""

    def __init__(self, api: KubeApi, name: str, namespace: str, in_pod: bool):
        """``in_pod``: the supervisor reading and writing it runs in the run's supervisor pod (its ServiceAccount;
        ``KubernetesBackend.host``: SIGTERM leaves the tasks to the next pod), not on the launching machine."""
        self.api, self.name, self.namespace, self.in_pod = api, name, namespace, in_pod
        self._written: tuple[float, tuple[object, ...]] | None = None

    def read_plan(self) -> Plan:
        return plan_of(self.api, self.name, self.namespace)

    def read_status(self) -> JobStatus | None:
        return published(apply.config_map(self.api, self.name, self.namespace))

    def write_status(self, status: JobStatus) -> None:
        """Write ``status`` (``status_text``), unless it only moved the run's progress on within
        ``PROGRESS_WRITE_SECONDS`` of the last write (the supervisor publishes at every step it reads; the API server
        needs far fewer writes). A write that fails raises (``LaunchError``), and the next one is not skipped."""
        now, shape = time.monotonic(), _shape(status)
        if self._written is not None and self._written[1] == shape and now - self._written[0] < PROGRESS_WRITE_SECONDS:
            return
        config_map = apply.config_map(self.api, self.name, self.namespace)
        room = CONFIG_MAP_LIMIT - data_bytes({k: v for k, v in config_map.get("data", {}).items() if k != STATUS_KEY})
        apply.write_data(self.api, config_map, STATUS_KEY, status_text(status, room - len(STATUS_KEY)), self.namespace)
        self._written = now, shape

    def keep_stacks(self, number: int, dumps: Mapping[str, str | None]) -> str | None:
        return keep_stacks(self.api, self.namespace, log.warning, self.name, number, dict(dumps))


def pod_state(api: KubeApi, name: str, namespace: str) -> StateDir:
    """The supervisor pod's ``StateDir``: its process's files in the pod's scratch space, the run's record in the
    run's ConfigMap."""
    store = ConfigMapStore(api, name, namespace, in_pod=True)
    state = StateDir(Path(TMP_DIR) / "tfcluster-supervisor" / name, record=store)
    state.root.mkdir(parents=True, exist_ok=True)
    return state
