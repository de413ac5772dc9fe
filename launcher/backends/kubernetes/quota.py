"""Whether the namespace's ResourceQuotas could ever admit a run: asked by ``up`` before it creates anything.

Contract: ``never_admitted(api, pods, namespace)`` reads the namespace's ResourceQuotas once and answers one line
per quota whose hard limit is below what the run's ``pods`` (every pod the run holds at once: its task pods, which
start whole with the gang, and its supervisor's) ask for together, naming the quota, each resource, the run's need
and the limit; an empty list when every quota could admit them (whatever other pods use now: a quota whose room is
taken frees, the run then waits ``pending`` with the API server's ``exceeded quota``, ``status`` says it). The
resources read are the quota's ``pods`` count and the compute resources it limits (``requests.<r>``,
``limits.<r>``, and ``cpu``, ``memory``, ``ephemeral-storage`` for their requests, extended resources such as
``requests.nvidia.com/gpu`` too) for the pods a quota's scopes select (``Terminating``/``NotTerminating``,
``BestEffort``/``NotBestEffort``, and a ``PriorityClass`` scope selector); a quota with a scope it does not know
is left out (never a refusal by guess), and so are object counts (``count/...``). A pod's request of a resource is
what the scheduler counts: the larger of its containers' sum and its largest init container. A launcher whose Role
may not list ResourceQuotas (an older ``k8s/rbac-launcher.yaml``) answers nothing. Pure but the one read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal

from launcher.backends.kubernetes.kubeapi import KubeApi, Obj, quantity
from launcher.errors import LaunchError

#: The quota names that stand for a request of a compute resource (``cpu`` is ``requests.cpu``).
BARE = ("cpu", "memory", "ephemeral-storage")


def never_admitted(api: KubeApi, pods: Sequence[Obj], namespace: str) -> list[str]:
    """See the module contract; ``pods`` are pod specs (a Job's ``spec.template.spec``)."""
    try:
        with api.errors(f"list the ResourceQuotas of namespace {namespace}"):
            quotas = api.resource_quotas(namespace)
    except LaunchError as exc:
        if 'cannot list resource "resourcequotas"' in str(exc):
            return []
        raise
    return [line for quota in quotas if (line := _over(quota, pods))]


def _over(quota: Obj, pods: Sequence[Obj]) -> str:
    """One line if ``quota`` can never admit the ``pods`` it selects, else ""."""
    selected = [pod for pod in pods if _selects(quota.get("spec") or {}, pod)]
    if not selected:
        return ""
    over = []
    for name, hard in sorted(((quota.get("spec") or {}).get("hard") or {}).items()):
        need = _need(name, selected)
        if need is not None and need > quantity(hard):
            over.append(f"{name} {_shown(name, need)} > {hard}")
    if not over:
        return ""
    return (f"ResourceQuota {quota['metadata']['name']} can never admit the run's {len(selected)} pods at once "
            f"({', '.join(over)}: the run's need against the quota's hard limit); a namespace admin raises it, or "
            "the run asks for less")


def _need(name: str, pods: Sequence[Obj]) -> Decimal | None:
    """What ``pods`` ask together of the quota's resource ``name``; None for one this check leaves out."""
    if name == "pods":
        return Decimal(len(pods))
    kind, _, resource = name.partition(".")
    if name in BARE:
        kind, resource = "requests", name
    if kind not in ("requests", "limits") or not resource:  # ``count/...``: its kind is no such word
        return None
    return sum((_asked(pod, kind, resource) for pod in pods), Decimal(0))


def _shown(name: str, need: Decimal) -> str:
    """``need`` of resource ``name`` as a person reads it: bytes in MiB, else the number."""
    if "memory" in name or "storage" in name:
        return f"{need / 2**20:.0f}Mi"
    return f"{need.normalize():f}"


def _asked(pod: Obj, kind: str, resource: str) -> Decimal:
    """What one pod asks of ``resource`` (``kind``: requests or limits), as the scheduler counts it."""
    def of(containers: Iterable[Obj]) -> list[Decimal]:
        return [quantity(((c.get("resources") or {}).get(kind) or {}).get(resource, 0)) for c in containers]

    return max([sum(of(pod.get("containers") or []), Decimal(0)), *of(pod.get("initContainers") or [])])


def _selects(spec: Obj, pod: Obj) -> bool:
    """Whether a quota of ``spec`` counts ``pod`` (its scopes and scope selector); False for a scope unknown here."""
    expressions = [{"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []]
    expressions += (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    return all(_matches(expression, pod) for expression in expressions)


def _matches(expression: Obj, pod: Obj) -> bool:
    scope, operator = expression.get("scopeName"), expression.get("operator")
    terminating = pod.get("activeDeadlineSeconds") is not None
    best_effort = not any((c.get("resources") or {}).get(k) for c in pod.get("containers") or []
                          for k in ("requests", "limits"))
    flags = {"Terminating": terminating, "NotTerminating": not terminating,
             "BestEffort": best_effort, "NotBestEffort": not best_effort}
    if scope in flags and operator == "Exists":
        return flags[scope]
    if scope == "PriorityClass":
        priority = pod.get("priorityClassName")
        values = expression.get("values") or []
        return {"In": priority in values, "NotIn": priority not in values, "Exists": priority is not None,
                "DoesNotExist": priority is None}.get(str(operator), False)
    return False
