"""Which program each role's tasks run: the one home of "does this task run the built-in entrypoint".

Contract: pure functions of the spec. A role runs its own ``command`` when it
has one (``[]``: the image's own), else the spec's cluster-level ``command``
when ``runs_program``, else the built-in entrypoint (``runs_entrypoint``);
its training tasks get a standby to restart in under ``restart.warm`` (``wants_standby``).
"""

from __future__ import annotations

from launcher.spec.models import ClusterSpec, RoleType, Strategy


def runs_program(role: RoleType, strategy: Strategy) -> bool:
    """True if tasks of ``role`` run the spec's cluster-level ``command``.

    Under ParameterServer the ps and worker tasks only serve: they run the
    built-in server (``launcher.worker``), and the program is the
    coordinator (chief) and the evaluator. Elsewhere every task runs it.
    """
    return not (strategy is Strategy.PARAMETER_SERVER and role in (RoleType.PS, RoleType.WORKER))


def runs_entrypoint(spec: ClusterSpec, role: RoleType, strategy: Strategy) -> bool:
    """True if tasks of ``role`` run the built-in entrypoint (whatever ``args`` follow it)."""
    return spec.roles.role(role).command is None and not (spec.command and runs_program(role, strategy))


def wants_standby(spec: ClusterSpec, role: RoleType, strategy: Strategy) -> bool:
    """True if tasks of ``role`` get a standby on a backend that keeps them (``Task.standby_command``):
    training tasks of the built-in entrypoint, under ``restart.warm``."""
    return spec.restart.warm and role.trains and runs_entrypoint(spec, role, strategy)


def runs_user_program(spec: ClusterSpec, strategy: Strategy) -> bool:
    """True if some task runs another program than the entrypoint."""
    return not all(runs_entrypoint(spec, role, strategy) for role in RoleType if spec.roles.replicas(role))
