"""Kubeflow ``kubeflow.org/v1`` TFJob manifests, read as they are: converted to a tfcluster spec mapping.

Contract: ``is_tfjob(data)`` tells a TFJob from a tfcluster spec (``apiVersion`` and ``kind``).
``convert(data)`` is pure and returns a ``Converted``: the equivalent spec mapping (validated later
like any spec), each field's ``origins`` (problems name the TFJob's field and line), and what does not
carry over: ``malformed`` (refused everywhere), ``dropped`` (refused by validate/dry-run/up),
``notes`` (carried with a difference), ``kubernetes_only`` and ``kubernetes_inert``. A null is unset.
``unexported(spec)``: the other way, what of a spec a TFJob export cannot carry (one note per field).
Shared names live in ``launcher.spec.tfjob_vocabulary``. The field mapping: docs/spec.md's migration table
(From a Kubeflow TFJob).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from launcher.spec.image_reference import pull_policy
from launcher.spec.models import ClusterSpec
from launcher.spec.problems import Problem, join_path, kind_of, one_line, split_path
from launcher.spec.tfjob_vocabulary import (
    ACTIVE_DEADLINE,
    API_VERSION,
    BACKOFF_LIMIT,
    CLEAN_POD_POLICY,
    CLEAN_POLICIES_AS_RUNNING,
    CONTAINER,
    EXPORT_OWN_CONTAINER_FIELDS,
    EXPORT_OWN_ENV,
    EXPORT_OWN_ENV_PREFIX,
    EXPORT_OWN_POD_FIELDS,
    EXPORT_OWN_VOLUMES,
    GRACE_PERIOD,
    KIND,
    MANAGED_BY,
    OWN_LABEL_PREFIX,
    PORT_NAME,
    PRIORITY_CLASS,
    RESTART_OF,
    ROLE_OF,
    SCHEDULING_POLICY,
    SUCCESS_OF,
    TTL_AFTER_FINISHED,
)

#: Pod-spec fields carried into ``kubernetes:`` (the same for every role).
POD_FIELDS = {"nodeSelector": "node_selector", "tolerations": "tolerations", "imagePullSecrets": "image_pull_secrets",
              "serviceAccountName": "service_account", "volumes": "volumes", "priorityClassName": "priority_class"}
#: Container fields carried into ``kubernetes:`` (the same for every role).
CONTAINER_POD_FIELDS = {"volumeMounts": "volume_mounts"}
#: ``kubernetes:`` fields that change nothing off Kubernetes: a warning there, not a refusal.
INERT_OFF_KUBERNETES = ("labels", "pod_labels", "pod_annotations")
#: Pod-template metadata carried into ``kubernetes:`` (the same for every role).
POD_METADATA_FIELDS = {"annotations": "pod_annotations", "labels": "pod_labels"}
#: The resources carried (``roles.<role>.resources``).
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
TOLERATION_FIELDS = {"key": "key", "operator": "operator", "value": "value", "effect": "effect",
                     "tolerationSeconds": "toleration_seconds"}
MOUNT_FIELDS = {"name": "name", "mountPath": "mount_path", "readOnly": "read_only", "subPath": "sub_path"}
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "resources", "ports", "imagePullPolicy",
                    *CONTAINER_POD_FIELDS}
RUN_POLICY_FIELDS = {BACKOFF_LIMIT, ACTIVE_DEADLINE, TTL_AFTER_FINISHED, CLEAN_POD_POLICY, SCHEDULING_POLICY}
Path = tuple[str, ...]


def is_tfjob(data: Any) -> bool:
    return isinstance(data, dict) and data.get("apiVersion") == API_VERSION and data.get("kind") == KIND


@dataclass
class Converted:
    """A TFJob as a spec mapping; see the module contract."""

    data: dict[str, Any] = field(default_factory=dict)
    origins: dict[Path, Path] = field(default_factory=dict)
    malformed: list[Problem] = field(default_factory=list)
    dropped: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    kubernetes_only: list[Problem] = field(default_factory=list)
    kubernetes_inert: list[Problem] = field(default_factory=list)

    def put(self, spec_path: Path, value: Any, origin: Path) -> None:
        node = self.data
        for key in spec_path[:-1]:
            node = node.setdefault(key, {})
        node[spec_path[-1]] = value
        self.origins[spec_path] = origin

    def put_kubernetes_only(self, field_name: str, value: Any, origin: Path) -> None:
        """``kubernetes.<field_name>``, which the other backends refuse (``kubernetes_only``), or, for labels and
        annotations, which change nothing a job computes or reaches, only warn of (``kubernetes_inert``)."""
        self.put(("kubernetes", field_name), value, origin)
        if field_name in INERT_OFF_KUBERNETES:
            self.kubernetes_inert.append(Problem(join_path(origin), "no effect off Kubernetes (-b k8s carries it)"))
        else:
            self.kubernetes_only.append(Problem(join_path(origin), "only the Kubernetes backend carries it (-b k8s)"))

    def drop(self, origin: Path, why: str) -> None:
        self.dropped.append(Problem(join_path(origin), f"not carried: {why}"))

    def note(self, origin: Path, what: str) -> None:
        self.notes.append(Problem(join_path(origin), what))

    def mapping(self, value: Any, origin: Path) -> dict[Any, Any]:
        """``value`` if it is a mapping; absent (null) is empty; anything else is one problem, then empty."""
        if value is None or isinstance(value, dict):
            return value or {}
        self.malformed.append(Problem(join_path(origin), f"must be a mapping, not {kind_of(value)}"))
        return {}

    def items(self, value: Any, origin: Path) -> list[Any]:
        """``value`` if it is a list; absent (null) is empty; anything else is one problem, then empty."""
        if value is None or isinstance(value, list):
            return value or []
        self.malformed.append(Problem(join_path(origin), f"must be a list, not {kind_of(value)}"))
        return []

    def strings(self, value: Any, origin: Path) -> list[str]:
        """A container's ``command`` or ``args``: a list of strings. A single string is refused, not split: Kubernetes
        would run it as one program name."""
        if isinstance(value, str):
            self.malformed.append(Problem(join_path(origin), "must be a list of strings: Kubernetes runs a single "
                                                           "string as one program name, it does not split it into "
                                                           "words (write [python, train.py])"))
            return []
        found = self.items(value, origin)
        for i, item in enumerate(found):
            if not isinstance(item, str):
                self.malformed.append(Problem(join_path((*origin, str(i))), f"must be a string, not {kind_of(item)}"))
        return [item for item in found if isinstance(item, str)]

    def origin(self, spec_path: str) -> str:
        """The TFJob field a spec path came from (its longest converted prefix); the path itself if none."""
        parts = split_path(spec_path)
        for end in range(len(parts), 0, -1):
            if parts[:end] in self.origins:
                return join_path(self.origins[parts[:end]] + parts[end:])
        return spec_path or "spec"

    def lines(self, tfjob_lines: dict[Path, int]) -> dict[Path, int]:
        """The loader's line map for the spec mapping, from the TFJob's."""
        return {path: tfjob_lines[origin] for path, origin in self.origins.items() if origin in tfjob_lines}


def to_yaml(converted: Converted, source: str) -> str:
    """The spec as YAML (``tfcluster convert``), headed by one comment per TFJob field it does not carry, carries
    with a difference or only on Kubernetes. Every comment passes ``comment``, so no text of the TFJob or its file
    name (``source``) can start a line of its own; the body is the YAML emitter's alone."""
    header = [f"tfcluster spec converted from the TFJob {source}"]
    header += [f"not carried: {p.path}: {p.message.removeprefix('not carried: ')}" for p in converted.dropped]
    header += [f"note: {p.path}: {p.message}" for p in converted.notes]
    header += [f"Kubernetes only (-b k8s): {p.path}" for p in converted.kubernetes_only + converted.kubernetes_inert]
    return "".join(map(comment, header)) + yaml.dump(converted.data, Dumper=_OneLinePerValue, sort_keys=False, width=math.inf)


def comment(text: str) -> str:
    """``text`` as one YAML comment line: every character that could end it escaped (``problems.one_line``)."""
    return f"# {one_line(text)}\n"


class _OneLinePerValue(yaml.SafeDumper):
    """YAML where a value never starts a line of its own: no folding of long values, and a string with a line
    break double-quoted (``"a\\nb"``), as PyYAML already writes one with ESC, BEL, C1 or U+2028 (``"\\e"``,
    ``"\\N"``, ``"\\L"``; it never writes them raw without ``allow_unicode``)."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if value.splitlines() != [value] else None)


_OneLinePerValue.add_representer(str, _string)


def convert(data: dict[str, Any]) -> Converted:
    out = Converted()
    data = _without_nulls(data)
    if _exported(data):
        data = _without_export_own(data)
        out.note(("metadata", "labels"), "a TFJob tfcluster exported: its own labels, pod hardening, service account, "
                                         "volumes and environment are dropped; tfcluster sets them again")
    metadata, spec = out.mapping(data.get("metadata"), ("metadata",)), out.mapping(data.get("spec"), ("spec",))
    out.put(("name",), metadata.get("name"), ("metadata", "name"))
    if "namespace" in metadata:
        out.put(("kubernetes", "namespace"), metadata["namespace"], ("metadata", "namespace"))
    labels = _without_own_labels(out, metadata.get("labels"), ("metadata", "labels"))
    if labels:
        out.put_kubernetes_only("labels", labels, ("metadata", "labels"))
    for key in _extra(metadata, {"name", "namespace", "labels"}):
        if key == "annotations":
            out.drop(("metadata", key), "tfcluster has no annotations for its objects (pod template annotations "
                                        "are carried)")
        else:
            out.drop(("metadata", key), "set by the Kubernetes API server, not by a manifest")
    for key in _extra(data, {"apiVersion", "kind", "metadata", "spec"}):
        out.drop((key,), "not part of a TFJob's definition")
    replicas = out.mapping(spec.get("tfReplicaSpecs"), ("spec", "tfReplicaSpecs"))
    out.origins[("roles",)] = ("spec", "tfReplicaSpecs")
    if not replicas and isinstance(spec.get("tfReplicaSpecs", {}), dict):
        out.dropped.append(Problem("spec.tfReplicaSpecs", "a TFJob needs at least one replica spec"))
    restarts: dict[str, tuple[str, Path]] = {}
    pod_fields: dict[str, tuple[Any, Path]] = {}
    seen: dict[str, str] = {}
    for replica_type, replica in replicas.items():
        where = ("spec", "tfReplicaSpecs", replica_type)
        found = ROLE_OF.get(replica_type) if isinstance(replica_type, str) else None
        if found is None:
            out.dropped.append(Problem(join_path(where), f"unknown replica type (allowed: {', '.join(ROLE_OF)})"))
            continue
        if found.value in seen:
            out.malformed.append(Problem(join_path(where), f"a second chief: {seen[found.value]} and {replica_type} name the "
                                                           "same replica type; give one"))
            continue
        role = found.value
        seen[role] = str(replica_type)
        _replica(out, role, out.mapping(replica, where), where, restarts, pod_fields)
    _restart_policy(out, restarts)
    run_policy = out.mapping(spec.get("runPolicy"), ("spec", "runPolicy"))  # once: a malformed one is one problem
    _scheduling_policy(out, run_policy, pod_fields)
    for name, (value, origin) in pod_fields.items():
        if name == GRACE_PERIOD:
            out.put(("checkpoint", "save_grace_seconds"), value, origin)
        else:
            out.put_kubernetes_only({**POD_FIELDS, **CONTAINER_POD_FIELDS, **POD_METADATA_FIELDS}[name], value, origin)
    _run_policy(out, run_policy)
    if "successPolicy" in spec:
        policy = SUCCESS_OF.get(spec["successPolicy"]) if isinstance(spec["successPolicy"], str) else None
        if policy is None:
            out.drop(("spec", "successPolicy"), f"unknown value {spec['successPolicy']!r}")
        else:
            out.put(("success_policy",), policy.value, ("spec", "successPolicy"))
    for key in _extra(spec, {"tfReplicaSpecs", "runPolicy", "successPolicy"}):
        out.drop(("spec", key), "tfcluster has no such setting")
    return out


def _replica(out: Converted, role: str, replica: dict[str, Any], where: Path,
             restarts: dict[str, tuple[str, Path]], pod_fields: dict[str, tuple[Any, Path]]) -> None:
    out.put(("roles", role, "replicas"), replica.get("replicas", 1), (*where, "replicas"))
    if "restartPolicy" in replica:
        restarts[role] = (replica["restartPolicy"], (*where, "restartPolicy"))
    template = out.mapping(replica.get("template"), (*where, "template"))
    pod = out.mapping(template.get("spec"), (*where, "template", "spec"))
    for key in _extra(template, {"spec", "metadata"}):
        out.drop((*where, "template", key), "not part of a pod template")
    pod_metadata = out.mapping(template.get("metadata"), (*where, "template", "metadata"))
    for key in _extra(pod_metadata, set()):
        origin = (*where, "template", "metadata", key)
        if key == "labels":
            labels = _without_own_labels(out, pod_metadata[key], origin)
            if labels:
                _shared_field(out, pod_fields, key, labels, origin)
        elif key in POD_METADATA_FIELDS:
            _shared_field(out, pod_fields, key, pod_metadata[key], origin)
        else:
            out.drop(origin, "tfcluster names its pods itself")
    containers = out.items(pod.get("containers"), (*where, "template", "spec", "containers"))
    at = next((i for i, c in enumerate(containers) if isinstance(c, dict) and c.get("name") == CONTAINER), 0)
    for key in _extra(pod, {"containers", GRACE_PERIOD, *POD_FIELDS}):
        out.drop((*where, "template", "spec", key), "tfcluster does not carry this pod field yet")
    for name in (GRACE_PERIOD, *POD_FIELDS):
        if name in pod:
            _shared_field(out, pod_fields, name, pod[name], (*where, "template", "spec", name))
    for i in range(len(containers)):
        if i != at:
            out.drop((*where, "template", "spec", "containers", str(i)), "only the TensorFlow container is run")
    if not containers:
        out.dropped.append(Problem(join_path((*where, "template", "spec", "containers")), "a replica needs a container"))
        return
    container_path = (*where, "template", "spec", "containers", str(at))
    container = out.mapping(containers[at], container_path)
    for name in CONTAINER_POD_FIELDS:
        if name in container:
            _shared_field(out, pod_fields, name, container[name], (*container_path, name))
    _container(out, role, container, container_path)


def _shared_field(out: Converted, pod_fields: dict[str, tuple[Any, Path]], name: str, value: Any, origin: Path) -> None:
    """Record a field tfcluster sets for every role; a role whose value differs from the first one is reported."""
    value = _pod_field(name, value)
    if name in pod_fields and pod_fields[name][0] != value:
        out.drop(origin, f"differs from {join_path(pod_fields[name][1])}; tfcluster sets it for every role")
    pod_fields.setdefault(name, (value, origin))


def _container(out: Converted, role: str, container: dict[str, Any], where: Path) -> None:
    base = ("roles", role)
    if "image" in container:
        out.put((*base, "image"), container["image"], (*where, "image"))
    _program(out, base, container, where)
    env = {}
    for i, var in enumerate(out.items(container.get("env"), (*where, "env"))):
        at = (*where, "env", str(i))
        if not isinstance(var, dict) or not isinstance(var.get("name"), str):
            out.malformed.append(Problem(join_path(at), "an env entry is a mapping with a string name"))
        elif "valueFrom" in var:
            out.drop(at, "only literal values are carried (valueFrom is not)")
        elif isinstance(var.get("value", ""), (dict, list)):
            out.malformed.append(Problem(join_path((*at, "value")), f"must be a string, not {kind_of(var['value'])}"))
        else:
            env[var["name"]] = str(var.get("value", ""))
    if env:
        out.put((*base, "env"), env, (*where, "env"))
    _resources(out, base, out.mapping(container.get("resources"), (*where, "resources")), (*where, "resources"))
    _ports(out, base, container.get("ports"), (*where, "ports"))
    if "imagePullPolicy" in container:
        _pull_policy(out, container, (*where, "imagePullPolicy"))
    for key in _extra(container, CONTAINER_FIELDS):
        out.drop((*where, key), "tfcluster does not carry this container field")


def _resources(out: Converted, base: Path, resources: dict[str, Any], where: Path) -> None:
    """Each amount from ``limits``, else ``requests``; tfcluster renders requests = limits, so a request-only
    amount becomes a limit too and a request below its limit is raised to it (both noted)."""
    limits = out.mapping(resources.get("limits"), (*where, "limits"))
    requests = out.mapping(resources.get("requests"), (*where, "requests"))
    amounts = {**requests, **limits}
    for name, value in amounts.items():
        origin = (*where, "limits" if name in limits else "requests", name)
        if name in RESOURCES and name not in limits:
            out.note(origin, "a request only: tfcluster renders requests = limits, so it is a limit too")
        elif name in RESOURCES and name in requests and requests[name] != value:
            out.note((*where, "requests", name), "raised to the limit: tfcluster renders requests = limits")
        if name == "cpu":
            out.put((*base, "resources", "cpu"), _cpu(value), origin)
        elif name == "memory":
            out.put((*base, "resources", "memory"), str(value), origin)
        elif name == "nvidia.com/gpu":
            out.put((*base, "resources", "gpu"), value, origin)
        else:
            out.drop(origin, "only cpu, memory and nvidia.com/gpu are carried")


def _ports(out: Converted, base: Path, ports: Any, where: Path) -> None:
    """``tfjob-port`` -> the role's ``port``; other declarations have no effect in Kubernetes, a ``hostPort`` has."""
    for i, port in enumerate(out.items(ports, where)):
        at = (*where, str(i))
        entry = out.mapping(port, at)
        if "hostPort" in entry:
            out.drop((*at, "hostPort"), "tfcluster does not bind ports on the node")
        elif entry.get("name") == PORT_NAME:
            out.put((*base, "port"), entry.get("containerPort"), (*at, "containerPort"))
        else:
            out.note(at, "ignored: a declaration only, Kubernetes opens or closes no port by it")


def _pull_policy(out: Converted, container: dict[str, Any], where: Path) -> None:
    """tfcluster's pods get ``image_reference.pull_policy`` of their image (rendered, also in the TFJobs it
    exports), so only that value is carried, silently."""
    policy = pull_policy(str(container.get("image", "")))
    if container["imagePullPolicy"] != policy:
        out.drop(where, f"tfcluster's pods get {policy} for this image")


def _program(out: Converted, base: Path, container: dict[str, Any], where: Path) -> None:
    """Kubernetes' rule: ``command`` replaces the image's ENTRYPOINT (and CMD), ``args`` alone replace its CMD."""
    command = out.strings(container.get("command"), (*where, "command"))
    args = out.strings(container.get("args"), (*where, "args"))
    out.put((*base, "command"), [*command, *args],
            (*where, "args") if "args" in container and not command else (*where, "command"))
    if command:
        out.put((*base, "replaces_entrypoint"), True, (*where, "command"))


def _restart_policy(out: Converted, restarts: dict[str, tuple[str, Path]]) -> None:
    """One policy for the job: the chief's, else the workers', else any role's; differing ones are reported."""
    if not restarts:
        return
    lead = next((restarts[r] for r in ("chief", "worker") if r in restarts), next(iter(restarts.values())))
    value, origin = lead
    if not isinstance(value, str) or value not in RESTART_OF:
        out.drop(origin, f"unknown restartPolicy {value!r} (allowed: {', '.join(RESTART_OF)})")
        return
    out.put(("restart", "policy"), RESTART_OF[value].value, origin)
    for other, other_origin in restarts.values():
        if other != value:
            out.drop(other_origin, f"differs from {join_path(origin)}; tfcluster has one restart policy per job")


def _run_policy(out: Converted, run_policy: dict[str, Any]) -> None:
    where = ("spec", "runPolicy")
    for key, target in ((BACKOFF_LIMIT, ("restart", "max_restarts")),
                        (ACTIVE_DEADLINE, ("deadline_seconds",)),
                        (TTL_AFTER_FINISHED, ("kubernetes", "ttl_seconds_after_finished"))):
        if key in run_policy:
            out.put(target, run_policy[key], (*where, key))
    clean = run_policy.get(CLEAN_POD_POLICY)
    if clean == "None":
        out.note((*where, CLEAN_POD_POLICY), "tfcluster deletes the pods still running once the job ended (as "
                                             "Running); what the job computes is the same")
    elif clean is not None and clean not in CLEAN_POLICIES_AS_RUNNING:
        out.drop((*where, CLEAN_POD_POLICY), f"unknown value {clean!r} (allowed: None, Running, All)")
    for key in _extra(run_policy, RUN_POLICY_FIELDS):
        out.drop((*where, key), "tfcluster has no such setting")


def _scheduling_policy(out: Converted, run_policy: dict[str, Any], pod_fields: dict[str, tuple[Any, Path]]) -> None:
    """``runPolicy.schedulingPolicy``: its ``priorityClass`` (the operator's PodGroup's, which its pods share) is the
    pods' ``priorityClassName``, a value differing from theirs reported as every other shared field is; its gang
    settings are no setting of tfcluster's (``minAvailable``: every task of a run starts together or not at all)."""
    where = ("spec", "runPolicy", SCHEDULING_POLICY)
    policy = out.mapping(run_policy.get(SCHEDULING_POLICY), where)
    if PRIORITY_CLASS in policy:
        _shared_field(out, pod_fields, "priorityClassName", policy[PRIORITY_CLASS], (*where, PRIORITY_CLASS))
    for key in _extra(policy, {PRIORITY_CLASS}):
        out.drop((*where, key), "tfcluster has no such setting")


def _pod_field(name: str, value: Any) -> Any:
    if name == "imagePullSecrets" and isinstance(value, list):
        return [s.get("name") if isinstance(s, dict) else s for s in value]
    renamed = {"tolerations": TOLERATION_FIELDS, "volumeMounts": MOUNT_FIELDS}.get(name)
    if renamed is not None and isinstance(value, list):
        return [{renamed.get(k, k): v for k, v in item.items()} if isinstance(item, dict) else item for item in value]
    return value


def _cpu(value: Any) -> Any:
    """A Kubernetes CPU quantity (``500m``, ``2``) as cores; anything else is left for validation to report."""
    text = str(value)
    try:
        return int(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return value


def _without_own_labels(out: Converted, labels: Any, origin: Path) -> Any:
    """``labels`` without those tfcluster puts on what it creates (a TFJob it exported, read back); a shape
    other than a mapping is left for validation to report."""
    if not isinstance(labels, dict):
        return labels
    own = [key for key, value in labels.items()
           if str(key).startswith(OWN_LABEL_PREFIX) or (key, value) == MANAGED_BY]
    if own:
        out.note(origin, f"tfcluster's own labels dropped: {', '.join(map(str, own))}; it sets them itself")
    return {key: value for key, value in labels.items() if key not in own}


def _exported(data: dict[Any, Any]) -> bool:
    """True for a TFJob tfcluster's export wrote (its ``MANAGED_BY`` label)."""
    metadata = data.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    key, value = MANAGED_BY
    return isinstance(labels, dict) and labels.get(key) == value


def _without_export_own(data: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of a TFJob tfcluster exported without what the export writes on its own account
    (``tfjob_vocabulary.EXPORT_OWN_*``, its labels); any part of another shape is left for the reader to report."""
    data = copy.deepcopy(data)
    _strip_own_labels(data.get("metadata"))
    spec = data.get("spec")
    replicas = spec.get("tfReplicaSpecs") if isinstance(spec, dict) else None
    for replica in replicas.values() if isinstance(replicas, dict) else []:
        template = replica.get("template") if isinstance(replica, dict) else None
        if not isinstance(template, dict):
            continue
        _strip_own_labels(template.get("metadata"))
        pod = template.get("spec")
        if not isinstance(pod, dict):
            continue
        if pod.get("automountServiceAccountToken") is False:  # the export's own account, no token: tfcluster's
            pod.pop("serviceAccountName", None)
        for key in EXPORT_OWN_POD_FIELDS:
            pod.pop(key, None)
        _strip_named(pod, "volumes", lambda name: name in EXPORT_OWN_VOLUMES)
        containers = pod.get("containers")
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, dict):
                for key in EXPORT_OWN_CONTAINER_FIELDS:
                    container.pop(key, None)
                _strip_named(container, "volumeMounts", lambda name: name in EXPORT_OWN_VOLUMES)
                _strip_named(container, "env", lambda name: name in EXPORT_OWN_ENV or
                             str(name).startswith(EXPORT_OWN_ENV_PREFIX))
    return data


def _strip_own_labels(metadata: Any) -> None:
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if isinstance(labels, dict):
        for key in [k for k, v in labels.items() if str(k).startswith(OWN_LABEL_PREFIX) or (k, v) == MANAGED_BY]:
            del labels[key]
        if not labels:
            del metadata["labels"]


def _strip_named(owner: dict[Any, Any], key: str, own: Callable[[Any], bool]) -> None:
    """Remove the entries of the list ``owner[key]`` whose ``name`` is ``own``; the key too once it is empty."""
    entries = owner.get(key)
    if not isinstance(entries, list):
        return
    kept = [e for e in entries if not (isinstance(e, dict) and own(e.get("name")))]
    if kept:
        owner[key] = kept
    else:
        del owner[key]


def _without_nulls(value: Any) -> Any:
    """``value`` with null-valued keys removed at every level: in a Kubernetes manifest, null is unset."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _extra(mapping: dict[Any, Any], known: set[str]) -> list[Any]:
    """The keys of ``mapping`` not in ``known``, in a stable order whatever their types."""
    return sorted((key for key in mapping if key not in known), key=str)


def unexported(spec: ClusterSpec) -> list[Problem]:
    """What of ``spec`` a TFJob export (``render --format tfjob``) cannot carry: one note per field, naming what
    is lost. A TFJob's ``restartPolicy`` treats every failure of a replica alike: ``restart.rules`` are not in it."""
    return [
        Problem(join_path(("restart", "rules", i)),
                f"not in the TFJob: Kubeflow's restartPolicy ({spec.restart.policy.value}) treats every failure "
                f"alike, so this rule's {rule.action.value} is lost there; tfcluster's own Jobs (render or up -b k8s) enforce it")
        for i, rule in enumerate(spec.restart.rules)
    ]
