"""The API server's semantic checks of the fields tfcluster relies on, for the fake (``kubernetes_api``).

Contract: ``invalid(plural, obj)`` returns the problems the API server's
validation reports for a created object (``[]`` when valid), as
``"<field path>: <reason>"``; ``immutable(plural, current, new)`` the fields an
update may not change. ``success_indexes(text, completions)`` parses the
``successPolicy`` interval grammar (``"0,2-4"``: ascending, non-overlapping
decimal intervals within ``[0, completions)``) and raises ``ValueError`` on
anything else; ``success_rule_met(rule, done, completions)`` applies one rule
as the Job controller does. Only what is listed here is checked; the rest of
a real server's validation (and the OpenAPI schema, which the manifests are
checked against separately in ``test_k8s_render.py``) is not.
"""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]

#: At most this many ``successPolicy`` rules (the API's limit).
MAX_SUCCESS_RULES = 20
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")
#: A DNS-1123 subdomain, the rule for most object names (pods, jobs, configmaps, ...).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def success_indexes(text: str, completions: int) -> set[int]:
    """The indexes ``succeededIndexes`` names; ``ValueError`` for text the API server refuses."""
    indexes: set[int] = set()
    last = -1
    for part in text.split(","):
        match = _INTERVAL.fullmatch(part)
        if match is None:
            raise ValueError(f"cannot parse {part!r} as an index or an interval of indexes")
        first, end = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if end < first:
            raise ValueError(f"interval {part!r}: the first index must not be above the last")
        if first <= last:
            raise ValueError(f"interval {part!r}: intervals must be ascending and must not overlap")
        if end >= completions:
            raise ValueError(f"index {end} is out of range: must be less than completions ({completions})")
        indexes.update(range(first, end + 1))
        last = end
    return indexes


def success_rule_met(rule: Obj, done: set[int], completions: int) -> bool:
    """Whether one ``successPolicy`` rule holds for the succeeded indexes ``done``.

    ``succeededIndexes`` alone: every index named succeeded; ``succeededCount``
    alone: at least that many indexes succeeded; both: at least that many of
    the indexes named succeeded.
    """
    named = success_indexes(rule["succeededIndexes"], completions) if "succeededIndexes" in rule else set(range(completions))
    count = rule.get("succeededCount")
    if count is None:
        return named <= done
    return len(named & done) >= count


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
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions")
    if indexed and completions is None:
        problems.append("spec.completions: Required value: when completion mode is Indexed")
    for field in ("backoffLimitPerIndex", "successPolicy"):
        if field in spec and not indexed:
            problems.append(f"spec.{field}: Invalid value: requires Indexed completion mode")
    if "maxFailedIndexes" in spec and "backoffLimitPerIndex" not in spec:
        problems.append("spec.maxFailedIndexes: Required value: when maxFailedIndexes is specified, backoffLimitPerIndex must also be specified")
    if "podFailurePolicy" in spec:
        if restart != "Never":
            problems.append("spec.template.spec.restartPolicy: Invalid value: only \"Never\" is supported when podFailurePolicy is specified")
        if spec.get("podReplacementPolicy", "Failed") != "Failed":
            problems.append("spec.podReplacementPolicy: Invalid value: must be Failed when podFailurePolicy is specified")
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline < 0):
        problems.append(f"spec.activeDeadlineSeconds: Invalid value: {deadline!r}: must be greater than or equal to 0")
    if "successPolicy" in spec and indexed and completions is not None:
        problems += _success_policy(spec["successPolicy"], completions)
    return problems


def _success_policy(policy: Obj, completions: int) -> list[str]:
    rules = policy.get("rules") or []
    if not rules:
        return ["spec.successPolicy.rules: Required value"]
    if len(rules) > MAX_SUCCESS_RULES:
        return [f"spec.successPolicy.rules: Too many: {len(rules)}: must have at most {MAX_SUCCESS_RULES} items"]
    problems = []
    for i, rule in enumerate(rules):
        where = f"spec.successPolicy.rules[{i}]"
        if "succeededIndexes" not in rule and "succeededCount" not in rule:
            problems.append(f"{where}: Required value: at least one of succeededCount or succeededIndexes must be specified")
            continue
        named = completions
        if "succeededIndexes" in rule:
            try:
                named = len(success_indexes(str(rule["succeededIndexes"]), completions))
            except ValueError as exc:
                problems.append(f"{where}.succeededIndexes: Invalid value: {rule['succeededIndexes']!r}: {exc}")
                continue
        count = rule.get("succeededCount")
        if count is not None and not (isinstance(count, int) and 0 < count <= min(named, completions)):
            problems.append(f"{where}.succeededCount: Invalid value: {count!r}: must be positive and at most the number of "
                            f"indexes it counts ({min(named, completions)})")
    return problems
