"""The planner's rules over a spec: what it cannot plan, reported like every other spec problem.

Contract: ``plan_problems(spec)`` returns the problems of a field-valid
spec that only the plan layer can see: environment variables the launcher
sets itself (``launcher.protocol.env``), Kubernetes labels that tfcluster or
the Job controller set and derived names over the DNS limit
(``launcher.plan.naming``). ``launcher.api`` hands it to the loader
with the backend's own checks, so ``validate`` reports them with lines.
"""

from __future__ import annotations

from launcher.plan import naming
from launcher.protocol import env
from launcher.spec.models import ClusterSpec, RoleType
from launcher.spec.problems import Problem, join_path


def reserved_env_problems(spec: ClusterSpec) -> list[Problem]:
    scopes = [(("env",), spec.env)] + [
        (("roles", role.value, "env"), spec.roles.role(role).env) for role in RoleType
    ]
    return [
        Problem(join_path((*where, key)), "is set by tfcluster and cannot be overridden")
        for where, variables in scopes
        for key in variables
        if key in env.RESERVED or key.startswith(env.RESERVED_PREFIX)
    ]


def reserved_label_problems(spec: ClusterSpec) -> list[Problem]:
    scopes = (("labels", spec.kubernetes.labels), ("pod_labels", spec.kubernetes.pod_labels))
    return [
        Problem(join_path(("kubernetes", field, key)), "is set by tfcluster or by Kubernetes' Job controller")
        for field, labels in scopes
        for key in labels
        if key in naming.RESERVED_LABELS or key.startswith(naming.RESERVED_LABEL_PREFIXES)
    ]


def plan_problems(spec: ClusterSpec) -> list[Problem]:
    return [*reserved_env_problems(spec), *reserved_label_problems(spec), *naming.name_problems(spec)]
