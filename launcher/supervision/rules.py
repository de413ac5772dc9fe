"""The supervisor's decisions: a typed exit in, an enum decision out, pure (after Ray Train's failure policy).

Contract: ``Rules(policy, tasks).decide(...)`` says what to do after one task's run ended: continue,
restart which tasks, succeed or fail (naming the task and its last error). Every rule is a question to
the plan's ``JobPolicy`` (``launcher.plan.policy``); this module only orders them: success, then
preemptions (``max_preemptions``), then the spec's failure rules, then ``retryable`` within the restart
budget. ``decide_stall`` applies ``JobPolicy.stall_action`` when the watchdog fired (a restart is only told
once the lead finished training: it would train again);
``decision_order`` orders one poll round's exits root cause first. The order in full:
docs/design-notes.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from launcher.plan.planner import Plan
from launcher.plan.policy import Failure, JobPolicy
from launcher.protocol.exitcodes import killed_by_signal
from launcher.protocol.roles import TaskRef
from launcher.spec.models import RestartPolicy, RoleType, RuleAction, StallAction


class Action(str, Enum):
    CONTINUE = "continue"
    RESTART = "restart"
    SUCCEED = "succeed"
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    """What to do after one exit. ``restart`` lists task names (RESTART only); ``message`` is for people.

    ``preemption``: the restart answers a preemption (counted apart; the tasks still running are saving).
    """

    action: Action
    restart: tuple[str, ...] = ()
    message: str = ""
    preemption: bool = False


class Member(Protocol):
    """What the rules read of a task: its name, role and reference (a plan's ``Task`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> RoleType: ...

    @property
    def ref(self) -> TaskRef: ...


@dataclass(frozen=True)
class Rules:
    """A plan's policy applied to its tasks; ``decide`` is pure."""

    policy: JobPolicy
    tasks: tuple[Member, ...]

    @classmethod
    def from_plan(cls, plan: Plan) -> Rules:
        return cls(plan.policy, tuple(plan.tasks))

    def task(self, name: str) -> Member:
        return next(t for t in self.tasks if t.name == name)

    def restart_group(self, name: str) -> tuple[str, ...]:
        """The tasks restarted together when ``name`` fails."""
        task = self.task(name)
        if self.policy.restarts_alone(task.type):
            return (name,)
        return tuple(t.name for t in self.tasks if t.type.trains)

    def deciding_tasks(self) -> tuple[str, ...]:
        """Tasks whose exit 0 makes the job succeed (all of them together)."""
        return tuple(t.name for t in self.tasks if self.policy.decides_success(t.ref))

    def decide(
        self,
        name: str,
        exit_code: int,
        exited: Mapping[str, int],
        restarts_used: int,
        last_error: str,
        preemptions_used: int = 0,
        log_tail: Sequence[str] = (),
        oom_killed: bool = False,
    ) -> Decision:
        """Decide after task ``name``'s current run exited with ``exit_code``.

        ``exited`` holds the exit codes of every task whose current run has
        ended (``name`` included); ``restarts_used`` and ``preemptions_used``
        count restart events so far (failures and preemptions apart);
        ``last_error`` is the task's last error line, for messages; ``log_tail`` its last output lines and
        ``oom_killed`` whether the OOM killer ended it (where the runtime knows), for the failure rules.
        """
        if exit_code == 0:
            if all(exited.get(t) == 0 for t in self.deciding_tasks()):
                return Decision(Action.SUCCEED, message=f"succeeded: {name} exited 0")
            server = self.task(name).type in (RoleType.PS, RoleType.EVALUATOR)
            if server and self.policy.restarts_servers():
                return self._restart(name, "exited 0 before the job ended", restarts_used, last_error)
            return Decision(Action.CONTINUE, message=f"{name} finished")
        if self.policy.preempted(exit_code) and preemptions_used < self.policy.max_preemptions:
            return self._restart_preempted(name, preemptions_used)
        failure = f"exited with code {exit_code}" + (" (OOM-killed)" if oom_killed else "")
        task = self.task(name)
        matched = self.policy.failure_rule(
            Failure(role=task.type, exit_code=exit_code, oom_killed=oom_killed, log_tail=tuple(log_tail)))
        if matched is not None:
            rule = matched.describe()
            if matched.action is RuleAction.RESTART:
                return self._restart(name, f"{failure}, {rule}", restarts_used, last_error)
            if matched.action is RuleAction.CONTINUE and not self.policy.decides_success(task.ref):
                return Decision(Action.CONTINUE, message=f"task {name} {failure}: {rule} (left ended)")
            if matched.action is RuleAction.CONTINUE:
                return Decision(Action.FAIL, message=f"failed: {rule} cannot apply: the job's success needs "
                                f"task {name}, which {failure}; last error: {last_error}")
            return Decision(Action.FAIL, message=f"failed: {rule}: task {name} {failure}; last error: {last_error}")
        if not self.policy.retryable(exit_code):
            why = ("restart policy exit-code retries only codes >= 128"
                   if self.policy.restart is RestartPolicy.EXIT_CODE else "restart policy never")
            return Decision(Action.FAIL, message=f"failed: task {name} {failure} ({why}); last error: {last_error}")
        return self._restart(name, failure, restarts_used, last_error)

    def decide_stall(self, suspects: Sequence[str], restarts_used: int, what: str, *, finished: bool) -> Decision:
        """After the watchdog found the job stalled; ``what`` says so for people (timeout, suspects, stacks).
        ``finished``: the lead had reported the end of training (``StallClock.finished``): a restart is only told,
        as it would train again from the start (its backup is deleted at the end of training); fail still fails."""
        action = self.policy.stall_action
        if finished and action is StallAction.RESTART:
            return Decision(Action.CONTINUE, message=f"stalled after training finished (warn only: a restart would "
                                                     f"train again): {what}")
        if action is StallAction.WARN:
            return Decision(Action.CONTINUE, message=f"stalled (warn only): {what}")
        budget = self.policy.budget()
        if action is StallAction.FAIL or restarts_used >= budget:
            used_up = "" if action is StallAction.FAIL else f" and the restart budget ({budget}) is used up"
            return Decision(Action.FAIL, message=f"failed: stalled{used_up}: {what}")
        names = suspects or [t.name for t in self.tasks if t.type.trains]
        group = tuple(dict.fromkeys(member for name in names for member in self.restart_group(name)))
        return Decision(Action.RESTART, restart=group,
                        message=f"stalled: {what}: restarting {', '.join(group)} (restart {restarts_used + 1}/{budget})")

    def _restart(self, name: str, failure: str, restarts_used: int, last_error: str) -> Decision:
        budget = self.policy.max_restarts
        if restarts_used >= budget:
            return Decision(
                Action.FAIL,
                message=f"failed: task {name} {failure} and the restart budget ({budget}) is used up; "
                f"last error: {last_error}",
            )
        group = self.restart_group(name)
        return Decision(
            Action.RESTART,
            restart=group,
            message=f"task {name} {failure}: restarting {', '.join(group)} "
            f"(restart {restarts_used + 1}/{budget}); last error: {last_error}",
        )


    def _restart_preempted(self, name: str, preemptions_used: int) -> Decision:
        budget = self.policy.max_preemptions
        group = self.restart_group(name)
        return Decision(
            Action.RESTART,
            restart=group,
            message=f"task {name} was preempted (saved): restarting {', '.join(group)} "
            f"(preemption {preemptions_used + 1}/{budget})",
            preemption=True,
        )


def decision_order(exits: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The exits of one poll round, in the order to decide them: successes, then signal deaths, then 1-127.

    Tasks that died together are decided root cause first: a killed worker
    (137) restarts the group before its peer's follow-on failure (e.g. 1) can
    fail the job under the ``exit-code`` policy.
    """
    return sorted(exits, key=lambda exit: (exit[1] != 0, exit[1] != 0 and not killed_by_signal(exit[1])))
