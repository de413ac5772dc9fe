"""Rules that relate several fields of a spec, and resolution of ``strategy: auto``.

Contract: ``check(spec)`` returns every problem of the spec's own fields
(empty list = valid); rules that need what lies above the spec (derived
names, reserved env, backend limits) are checked by the layers that own
that knowledge and reported by ``launcher.spec.loader`` alongside these.
``resolve_strategy(spec)`` is only meaningful for a spec with no problems.
"""

from __future__ import annotations

from launcher.spec.k8s_names import is_label_value
from launcher.spec.models import ClusterSpec, Collective, RoleType, Strategy
from launcher.spec.paths import normalized
from launcher.spec.problems import Problem

#: Strategies that train in a single task (one process, one or more local devices).
SINGLE_TASK_STRATEGIES = frozenset(
    {Strategy.MIRRORED, Strategy.ONE_DEVICE, Strategy.DEFAULT, Strategy.CENTRAL_STORAGE, Strategy.TPU}
)


def training_task_count(spec: ClusterSpec) -> int:
    """Tasks that take part in training: chief + workers (+ ps under PSS)."""
    return spec.roles.replicas(RoleType.CHIEF) + spec.roles.replicas(RoleType.WORKER)


def resolve_strategy(spec: ClusterSpec) -> Strategy:
    """The strategy the tasks will run.

    ``auto``: ps present -> parameter_server; more than one training task ->
    multi_worker_mirrored; a single task stays ``auto`` and the task picks
    mirrored (>1 GPU), one_device (1 GPU) or default (CPU) from its devices.
    """
    if spec.strategy is not Strategy.AUTO:
        return spec.strategy
    if spec.roles.replicas(RoleType.PS) > 0:
        return Strategy.PARAMETER_SERVER
    if training_task_count(spec) > 1:
        return Strategy.MULTI_WORKER_MIRRORED
    return Strategy.AUTO


def describe_resolution(spec: ClusterSpec) -> str:
    """Human-readable statement of what ``strategy`` means for this spec."""
    resolved = resolve_strategy(spec)
    if resolved is Strategy.AUTO:
        return "auto -> single task: mirrored (>1 GPU), one_device (1 GPU) or default (CPU), picked by the task"
    if spec.strategy is Strategy.AUTO:
        return f"auto -> {resolved.value}"
    return resolved.value


def check(spec: ClusterSpec, *, strategy_known: bool = True) -> list[Problem]:
    """Every cross-field problem of ``spec``, each naming the field to fix.

    ``strategy_known=False`` skips the rules that depend on the strategy (used
    when the spec's strategy itself was invalid and a default stands in).
    """
    fit = _strategy_fit(spec, resolve_strategy(spec)) if strategy_known else []
    strategy = resolve_strategy(spec) if strategy_known else None
    return [*_role_counts(spec), *fit, *_volumes(spec), *_tolerations(spec), *_entrypoints(spec),
            *_failure_rules(spec), *_backup_interval(spec, strategy), *_expected_mtbf(spec)]


def plannable(spec: ClusterSpec) -> bool:
    """True when the roles fit the strategy, so a plan can be made (what the rules of higher layers assume);
    other problems (volumes, entrypoints) leave a spec plannable."""
    return not _role_counts(spec) and not _strategy_fit(spec, resolve_strategy(spec))


def _role_counts(spec: ClusterSpec) -> list[Problem]:
    problems = []
    for role in (RoleType.CHIEF, RoleType.EVALUATOR):
        if spec.roles.replicas(role) > 1:
            problems.append(Problem(f"roles.{role.value}.replicas", f"at most one {role.value} is allowed"))
    if training_task_count(spec) == 0:
        problems.append(Problem("roles", "needs a chief or at least one worker to train"))
    return problems


def _entrypoints(spec: ClusterSpec) -> list[Problem]:
    """``replaces_entrypoint`` needs a program of the role's own to run in the ENTRYPOINT's place."""
    return [
        Problem(f"roles.{role.value}.replaces_entrypoint",
                f"needs a non-empty roles.{role.value}.command to run in place of the image's ENTRYPOINT")
        for role in RoleType
        if spec.roles.role(role).replaces_entrypoint and not spec.roles.role(role).command
    ]


def _strategy_fit(spec: ClusterSpec, strategy: Strategy) -> list[Problem]:
    roles = spec.roles
    ps, workers, chief = (roles.replicas(r) for r in (RoleType.PS, RoleType.WORKER, RoleType.CHIEF))
    problems = []
    name = strategy.value
    if strategy is Strategy.PARAMETER_SERVER:
        if ps < 1:
            problems.append(Problem("roles.ps.replicas", f"{name} needs at least 1 ps"))
        if workers < 1:
            problems.append(Problem("roles.worker.replicas", f"{name} needs at least 1 worker"))
        if chief != 1:
            problems.append(Problem("roles.chief.replicas", f"{name} needs a chief (the coordinator)"))
    elif ps > 0:
        problems.append(Problem("roles.ps.replicas", f"{name} does not use parameter servers; remove ps"))
    if strategy in SINGLE_TASK_STRATEGIES and training_task_count(spec) > 1:
        problems.append(
            Problem("strategy", f"{name} trains in one task, but the spec has {training_task_count(spec)} chief/worker tasks")
        )
    if strategy is Strategy.TPU and (spec.tpu is None or not (spec.tpu.name or spec.tpu.address)):
        problems.append(Problem("tpu", "strategy tpu needs tpu.name (with tpu.zone) or tpu.address"))
    if spec.tpu is not None and strategy is not Strategy.TPU:
        problems.append(Problem("tpu", f"only used with strategy tpu, not {name}"))
    if spec.collective is not Collective.AUTO and strategy is not Strategy.MULTI_WORKER_MIRRORED:
        problems.append(Problem("collective", f"only applies to multi_worker_mirrored, not {name}"))
    if spec.collective is Collective.NCCL and not any(
        roles.role(r).resources.gpu for r in (RoleType.CHIEF, RoleType.WORKER)
    ):
        problems.append(Problem("collective", "nccl needs GPUs: set roles.worker.resources.gpu"))
    return problems


def _volumes(spec: ClusterSpec) -> list[Problem]:
    """``kubernetes.volumes`` have distinct names; each mount names one of them at its own path."""
    k8s = spec.kubernetes
    problems = []
    names: set[str] = set()
    for i, volume in enumerate(k8s.volumes):
        if volume.name in names:
            problems.append(Problem(f"kubernetes.volumes.{i}.name", f"a second volume named {volume.name!r}"))
        names.add(volume.name)
    paths: set[str] = set()
    for i, mount in enumerate(k8s.volume_mounts):
        if mount.name not in names:
            known = ", ".join(sorted(names)) or "none"
            problems.append(Problem(f"kubernetes.volume_mounts.{i}.name",
                                    f"names no volume of kubernetes.volumes (defined: {known})"))
        path = normalized(mount.mount_path)
        if path in paths:
            problems.append(Problem(f"kubernetes.volume_mounts.{i}.mount_path", f"a second mount at {path}"))
        paths.add(path)
    return problems


def _tolerations(spec: ClusterSpec) -> list[Problem]:
    """How a toleration's fields fit together, as Kubernetes' ``ValidateTolerations`` has it: no key tolerates every
    taint, so only with ``Exists``; ``Exists`` matches any value, so it names none; ``Equal`` (the default) matches
    a label value; ``toleration_seconds`` is only read for ``NoExecute``."""
    problems = []
    k8s = spec.kubernetes
    listed = [("kubernetes.tolerations", k8s.tolerations),
              ("kubernetes.supervisor_placement.tolerations", k8s.supervisor_placement.tolerations)]
    for at, toleration in ((f"{where}.{i}", t) for where, tolerations in listed for i, t in enumerate(tolerations)):
        exists = toleration.operator == "Exists"
        if not toleration.key and not exists:
            problems.append(Problem(f"{at}.key", "is needed unless operator is Exists (no key: every taint)"))
        if exists and toleration.value:
            problems.append(Problem(f"{at}.value", "must be empty when operator is Exists"))
        elif not exists and not is_label_value(toleration.value or ""):
            problems.append(Problem(f"{at}.value", "is not a Kubernetes label value: empty or at most 63 letters, "
                                                   "digits, '-', '_' and '.', starting and ending with a letter or digit"))
        if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            problems.append(Problem(f"{at}.effect", "must be NoExecute when toleration_seconds is set"))
    return problems


def _failure_rules(spec: ClusterSpec) -> list[Problem]:
    """``restart.rules`` name only roles the spec has (a rule for another role could never match)."""
    have = [role for role in RoleType if spec.roles.replicas(role)]
    return [
        Problem(f"restart.rules.{i}.roles.{j}",
                f"the spec has no {role.value} (roles: {', '.join(r.value for r in have)})")
        for i, rule in enumerate(spec.restart.rules)
        for j, role in enumerate(rule.roles)
        if role not in have
    ]


def _backup_interval(spec: ClusterSpec, strategy: Strategy | None) -> list[Problem]:
    """A ``checkpoint.backup_every_steps`` stated as steps or ``auto`` under parameter_server is a problem: tf_keras'
    BackupAndRestore skips its batch hooks under ParameterServerStrategy, so PSS backs up once per epoch whatever
    the spec says (unstated, or ``null``, means just that). ``strategy``: None when unknown."""
    every = spec.checkpoint.backup_every_steps
    if strategy is not Strategy.PARAMETER_SERVER or every is None or "backup_every_steps" not in spec.checkpoint.model_fields_set:
        return []
    return [Problem("checkpoint.backup_every_steps",
                    f"{every} is not taken by parameter_server, which backs up once per epoch (tf_keras skips "
                    "step backups under ParameterServerStrategy): remove it or set null, or use multi_worker_mirrored "
                    "for backups every N steps")]


def _expected_mtbf(spec: ClusterSpec) -> list[Problem]:
    """``restart.expected_mtbf`` has one use, ``checkpoint.backup_every_steps: auto``'s interval: a stated MTBF
    nothing reads is a problem, not silence (``auto`` under parameter_server is ``_backup_interval``'s problem)."""
    if spec.restart.expected_mtbf is None or spec.checkpoint.backup_every_steps == "auto":
        return []
    return [Problem("restart.expected_mtbf", "only used by checkpoint.backup_every_steps: auto, which this spec "
                    "does not set: remove it or set auto")]
