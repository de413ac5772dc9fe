"""The job policy: every rule about restarts, success and deadlines, computed once by the planner.

Contract: ``make_policy(spec, strategy)`` turns the spec's policy fields and the resolved strategy
into a ``JobPolicy``; the supervisor's rules, Slurm's requeue and the compose restart mapping all read
it from here. It answers: ``retryable(code)``, restart groups, linger after success,
preemptions (bounded by ``max_preemptions``, with ``save_grace_seconds``), the stall watchdog's floor
and action, ``failure_rule(failure)`` for the spec's ``restart.rules``, and
success (``chief`` or ``all-workers``). Pure. The rules as a user meets them: docs/faults.md (Restarts,
Failure rules, Preemptions) and docs/spec.md.
"""

from __future__ import annotations

import signal

from pydantic import BaseModel, ConfigDict

from launcher.plan.programs import runs_user_program
from launcher.protocol.exitcodes import SIGNAL_EXIT_BASE, killed_by_signal, preempted
from launcher.protocol.roles import TaskRef, lead_task
from launcher.spec.models import (
    LOG_TAIL_LINES,
    ClusterSpec,
    FailureRule,
    RestartPolicy,
    RoleType,
    RuleAction,
    StallAction,
    Strategy,
    SuccessPolicy,
    compile_log_pattern,
)

BUILT_IN_LINGER_SECONDS = 30.0
USER_PROGRAM_LINGER_SECONDS = 5.0


#: The most characters of one output line a log pattern is searched in (with RE2's linear time: bounded work).
LOG_LINE_CHARS = 4096


class Failure(BaseModel):
    """A task's failed run, as the failure rules read it: its role, exit code (128+N for signal N), whether
    the kernel's OOM killer ended it (where the backend knows), and its last output lines."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: RoleType
    exit_code: int
    oom_killed: bool = False
    log_tail: tuple[str, ...] = ()

    @property
    def signal(self) -> str | None:
        """The name of the signal that killed the task (SIGKILL for an OOM kill), or None."""
        if self.oom_killed:
            return "SIGKILL"
        if not killed_by_signal(self.exit_code):
            return None
        try:
            return signal.Signals(self.exit_code - SIGNAL_EXIT_BASE).name
        except ValueError:
            return None


class RuleMatch(BaseModel):
    """The first failure rule a failure matched: its number (1-based, as people count), action, and what
    matched (``exit code 3``, ``signal SIGKILL, OOM-killed``, ``log pattern 'X'``, ``role evaluator``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int
    action: RuleAction
    why: str

    def describe(self) -> str:
        """``rule 1 (exit code 3): fail``: what ``status`` says decided."""
        return f"rule {self.number} ({self.why}): {self.action.value}"


def match_rule(rule: FailureRule, failure: Failure) -> str | None:
    """What of ``failure`` matched ``rule`` (every matcher it states must hold), or None. Pure."""
    why = []
    if rule.exit_codes:
        if failure.exit_code not in rule.exit_codes:
            return None
        why.append(f"exit code {failure.exit_code}")
    if rule.signals:
        if failure.signal not in rule.signals:
            return None
        why.append(f"signal {failure.signal}" + (", OOM-killed" if failure.oom_killed else ""))
    if rule.roles:
        if failure.role not in rule.roles:
            return None
        why.append(f"role {failure.role.value}")
    if rule.log_pattern is not None:
        pattern = compile_log_pattern(rule.log_pattern)
        if not any(pattern.search(line[:LOG_LINE_CHARS]) for line in failure.log_tail[-LOG_TAIL_LINES:]):
            return None
        why.append(f"log pattern {rule.log_pattern!r}")
    return ", ".join(why)


def first_rule(rules: tuple[FailureRule, ...], failure: Failure) -> RuleMatch | None:
    """The first of ``rules`` that ``failure`` matches, or None (then the restart policy decides). Pure."""
    for number, rule in enumerate(rules, start=1):
        why = match_rule(rule, failure)
        if why is not None:
            return RuleMatch(number=number, action=rule.action, why=why)
    return None


class JobPolicy(BaseModel):
    """What restarts, what succeeds, when the job gives up. Pure data plus pure questions about it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy
    restart: RestartPolicy
    max_restarts: int
    max_preemptions: int
    save_grace_seconds: int
    success: SuccessPolicy
    lead: TaskRef
    #: Roles whose every task must exit 0 for the job to succeed (the lead's role under ``chief``).
    success_roles: tuple[RoleType, ...]
    #: Roles whose failed task restarts alone; any other training task restarts every training task.
    solo_roles: tuple[RoleType, ...]
    deadline_seconds: int | None = None
    linger_seconds: float = BUILT_IN_LINGER_SECONDS
    #: The stall watchdog (``launcher.supervision.stall``): no stall before this many seconds without progress.
    stall_floor_seconds: float = 600.0
    stall_action: StallAction = StallAction.RESTART
    #: The spec's ``restart.rules``, in order (first match wins).
    failure_rules: tuple[FailureRule, ...] = ()

    def failure_rule(self, failure: Failure) -> RuleMatch | None:
        """The first failure rule ``failure`` matches (see the module contract), or None."""
        return first_rule(self.failure_rules, failure)

    def can_restart(self) -> bool:
        """True if some failure may be restarted: the restart policy's budget, or a ``restart`` rule's."""
        rule_restarts = any(rule.action is RuleAction.RESTART for rule in self.failure_rules)
        return self.budget() > 0 or (rule_restarts and self.max_restarts > 0)

    def requeueable(self) -> bool:
        """True if the job may run again after its allocation ends (Slurm ``--requeue``): a restart or a
        preemption may follow; False when every failure fails the job and a preemption counts as one."""
        return self.can_restart() or self.max_preemptions > 0

    def preempted(self, exit_code: int) -> bool:
        """True for the exit of a preempted task: restarted within ``max_preemptions``, never a failure."""
        return preempted(exit_code)

    def retryable(self, exit_code: int) -> bool:
        """True if a task that exited ``exit_code`` (non-zero) may be restarted."""
        if self.restart is RestartPolicy.NEVER:
            return False
        if self.restart is RestartPolicy.EXIT_CODE:
            return killed_by_signal(exit_code)
        return True

    def budget(self) -> int:
        """Restarts allowed (0 under ``never``)."""
        return 0 if self.restart is RestartPolicy.NEVER else self.max_restarts

    def decides_success(self, task: TaskRef) -> bool:
        """True if ``task`` exiting 0 is required for (and, with the others required, makes) success."""
        if self.success is SuccessPolicy.CHIEF:
            return task == self.lead
        return task.role in self.success_roles

    def restarts_alone(self, role: RoleType) -> bool:
        return role in self.solo_roles

    def restarts_servers(self) -> bool:
        """``always``: a ps or evaluator that exits 0 before the job ended is started again (they are servers)."""
        return self.restart is RestartPolicy.ALWAYS




def make_policy(spec: ClusterSpec, strategy: Strategy) -> JobPolicy:
    roles = [role for role in RoleType if spec.roles.replicas(role)]
    lead = lead_task(roles)
    success_roles: tuple[RoleType, ...]
    if spec.success_policy is SuccessPolicy.ALL_WORKERS:
        success_roles = tuple(r for r in roles if r in (RoleType.CHIEF, RoleType.WORKER))
    else:
        success_roles = (lead.role,)
    solo = (RoleType.EVALUATOR, RoleType.WORKER) if strategy is Strategy.PARAMETER_SERVER else (RoleType.EVALUATOR,)
    return JobPolicy(
        strategy=strategy,
        restart=spec.restart.policy,
        max_restarts=spec.restart.max_restarts,
        max_preemptions=spec.restart.max_preemptions,
        save_grace_seconds=spec.checkpoint.save_grace_seconds,
        success=spec.success_policy,
        lead=lead,
        success_roles=success_roles,
        solo_roles=solo,
        deadline_seconds=spec.deadline_seconds,
        linger_seconds=USER_PROGRAM_LINGER_SECONDS if runs_user_program(spec, strategy) else BUILT_IN_LINGER_SECONDS,
        stall_floor_seconds=spec.stall.timeout_seconds,
        stall_action=spec.stall.action,
        failure_rules=spec.restart.rules,
    )
