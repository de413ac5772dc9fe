"""The API server's semantic checks of the fields tfcluster relies on, for the fake (``kubernetes_api``).

Contract: ``invalid(plural, obj)`` returns the problems the API server's
validation reports for a created object (``[]`` when valid), as
``"<field path>: <reason>"``; ``immutable(plural, current, new)`` the fields an
update may not change. Only what is listed here is checked (names, containers
and images, a Job's template and ``restartPolicy``, a selector given without
``manualSelector``, a ConfigMap's data within ``CONFIG_MAP_BYTES``); the rest
of a real server's validation (and the OpenAPI schema, which the manifests are checked against separately in
``test_k8s_render.py``) is not.
"""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]

#: A DNS-1123 subdomain, the rule for most object names (pods, jobs, configmaps, ...).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: The most a ConfigMap's values may hold in all (the API server's ``MaxSecretSize``).
CONFIG_MAP_BYTES = 1024 * 1024


def invalid(plural: str, obj: Obj) -> list[str]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return ["metadata.name: Required value: name or generateName is required"]
    problems = [] if _NAME.fullmatch(name) and len(name) <= 253 else [f"metadata.name: Invalid value: {name!r}: a DNS-1123 subdomain"]
    spec = obj.get("spec")
    if plural == "pods":
        problems += _pod_spec(spec, "spec")
    elif plural == "jobs":
        problems += _job_spec(spec or {})
    elif plural == "configmaps" and sum(len(v.encode()) for v in (obj.get("data") or {}).values()) > CONFIG_MAP_BYTES:
        problems.append(f"[]: Too long: must have at most {CONFIG_MAP_BYTES} bytes")
    elif plural == "deployments":
        template = (spec or {}).get("template")
        problems += _pod_spec((template or {}).get("spec"), "spec.template.spec") if template else ["spec.template: Required value"]
    return problems


def immutable(plural: str, current: Obj, new: Obj) -> list[str]:
    if plural != "jobs":
        return []
    fields = ("template", "completionMode", "selector") if not current["spec"].get("suspend") else ("completionMode", "selector")
    return [f"spec.{field}: Invalid value: field is immutable"
            for field in fields if field in new.get("spec", {}) and new["spec"][field] != current["spec"].get(field)]


def _pod_spec(spec: Obj | None, path: str) -> list[str]:
    if not spec:
        return [f"{path}: Required value"]
    containers = spec.get("containers") or []
    problems = [] if containers else [f"{path}.containers: Required value"]
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            where = f"{path}.{kind}[{i}]"
            cname = container.get("name")
            if not cname:
                problems.append(f"{where}.name: Required value")
            elif cname in seen:
                problems.append(f"{where}.name: Duplicate value: {cname!r}")
            seen.add(cname or "")
            if not container.get("image"):
                problems.append(f"{where}.image: Required value")
    return problems


def _job_spec(spec: Obj) -> list[str]:
    template = spec.get("template")
    if not template:
        return ["spec.template: Required value"]
    pod = template.get("spec") or {}
    problems = _pod_spec(pod, "spec.template.spec")
    restart = pod.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        problems.append(f'spec.template.spec.restartPolicy: Unsupported value: {restart!r}: supported values: "OnFailure", "Never"')
    return problems


def given_selector(plural: str, obj: Obj) -> list[str]:
    """A Job created with a selector of its own but no ``manualSelector``: the API server makes the selector."""
    spec = obj.get("spec") or {}
    if plural != "jobs" or "selector" not in spec or spec.get("manualSelector"):
        return []
    return [f"spec.selector: Invalid value: {spec['selector']!r}: `selector` not auto-generated"]
