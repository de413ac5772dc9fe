"""The job policy: every rule about restarts, success and deadlines, computed once by the planner.

Contract: ``make_policy(spec, strategy)`` turns the spec's policy fields and
the resolved strategy into a ``JobPolicy``; everything that applies a policy
reads it from here: the supervisor's decisions (``launcher.supervision.rules``),
the Kubernetes Job fields (``podFailurePolicy``, ``successPolicy``, the
budget) and status/gang restarts, and the compose restart mapping. Rules,
after TFJob and the tf.distribute fault-tolerance guides:

- ``retryable(code)``: ``never`` retries nothing; ``on-failure`` and
  ``always`` retry every non-zero exit; ``exit-code`` retries exits caused by
  a signal (>= 128: OOM, preemption, kill -9) and fails on 1-127 (a bug).
- restart groups: MultiWorkerMirrored and single-task strategies restart
  every training task together (the survivors of a lost collective never
  recover alone); ParameterServer restarts a failed worker alone (the
  coordinator tolerates losing workers) but every training task when a ps
  or the chief fails; an evaluator always restarts alone.
- linger: after success the tasks still running get ``linger_seconds`` to
  exit by themselves before they are stopped (the job stays succeeded):
  30 s for the built-in program, whose ParameterServer servers end on the
  chief's completion marker; 5 s when the user's program runs (its servers,
  or ours serving it, see no marker and would serve, or ``join()``, forever).
- preemptions: a preempted exit (``ExitCode.PREEMPTED``, every training
  task saved on a termination notice) is no failure: its group restarts
  under every restart policy, bounded by ``max_preemptions`` instead of
  ``max_restarts``. Tasks get ``save_grace_seconds`` between the notice
  and SIGKILL (local stop, compose ``stop_grace_period``, Kubernetes
  ``terminationGracePeriodSeconds``).
- stalls: ``stall_floor_seconds`` and ``stall_action`` (spec ``stall``) parametrize the stall watchdog; its
  restart goes through the same groups and ``max_restarts`` as a failure.
- success: ``chief``: the lead task (the chief, or worker 0 without one:
  ``launcher.protocol.roles``) exited 0; ``all-workers``: the chief and
  every worker exited 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from launcher.plan.programs import runs_user_program
from launcher.protocol.exitcodes import SIGNAL_EXIT_BASE, ExitCode, killed_by_signal, preempted
from launcher.protocol.roles import TaskRef, lead_task
from launcher.spec.models import ClusterSpec, RestartPolicy, RoleType, StallAction, Strategy, SuccessPolicy

BUILT_IN_LINGER_SECONDS = 30.0
USER_PROGRAM_LINGER_SECONDS = 5.0


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

    def preempted(self, exit_code: int) -> bool:
        """True for the exit of a preempted task: restarted within ``max_preemptions``, never a failure."""
        return preempted(exit_code)

    def ignored_exit_codes(self) -> list[int]:
        """Exit codes that are no failure of the task (Kubernetes ``podFailurePolicy`` ``Ignore``)."""
        return [int(ExitCode.PREEMPTED)]

    def retryable(self, exit_code: int) -> bool:
        """True if a task that exited ``exit_code`` (non-zero) may be restarted."""
        if self.restart is RestartPolicy.NEVER:
            return False
        if self.restart is RestartPolicy.EXIT_CODE:
            return killed_by_signal(exit_code)
        return True

    def fatal_exit_codes(self) -> list[int]:
        """Non-zero exit codes that fail the job at once, whatever budget is left (``exit-code``: 1-127)."""
        return list(range(1, SIGNAL_EXIT_BASE)) if self.restart is RestartPolicy.EXIT_CODE else []

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

    def lead_decides_alone(self) -> bool:
        """True when the lead is worker 0 and its success alone ends the job (no chief, policy ``chief``)."""
        return self.success is SuccessPolicy.CHIEF and self.lead.role is RoleType.WORKER


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
    )
