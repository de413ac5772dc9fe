"""The supervisor's decisions: one typed status in, one typed ``Decision`` out, pure (after Ray Train's
``FailurePolicy.make_decision``).

Contract: ``Decider(policy, tasks).decide(ended)`` says what to do about ``ended``, one of: ``Exited`` (one task's
run ended: its exit code, how, the other tasks' exits), ``Stalled`` (the watchdog found the job stalled) or
``Requeued`` (the scheduler preempted the whole job and runs it again: Slurm's requeue); each carries the restarts
and preemptions ``Used`` so far. The ``Decision``'s ``Action`` is continue, restart which tasks, succeed or fail
(naming the task and its last error). Every rule is a question to the plan's ``JobPolicy``
(``launcher.plan.policy``); this module only orders them. An exit: success, then preemptions
(``max_preemptions``), then the spec's failure rules, then ``retryable`` within the restart budget (a preempted
exit past its own budget is decided as a failure). A stall: ``JobPolicy.stall_action`` (a restart is only told
once the lead finished training: it would train again). A requeue: a preemption of every task within
``max_preemptions``, else the job fails. ``decision_order`` orders one poll round's exits root cause first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, TypeAlias

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
    """What to do about one status. ``restart`` lists task names (RESTART only); ``message`` is for people.

    ``preemption``: the restart answers a preemption (counted apart; the tasks still running are saving).
    """

    action: Action
    restart: tuple[str, ...] = ()
    message: str = ""
    preemption: bool = False


@dataclass(frozen=True)
class Used:
    """The restarts and preemptions a job used so far (counted apart, each against its own budget)."""

    restarts: int = 0
    preemptions: int = 0


@dataclass(frozen=True)
class Exited:
    """Task ``task``'s current run ended with ``exit_code`` (128+N for signal N).

    ``exited`` holds the exit codes of every task whose current run has ended (``task`` included); ``last_error``
    is the task's last error line, for messages; ``log_tail`` its last output lines and ``oom_killed`` whether the
    OOM killer ended it (where the runtime knows), for the failure rules.
    """

    task: str
    exit_code: int
    exited: Mapping[str, int]
    used: Used = Used()
    last_error: str = ""
    log_tail: tuple[str, ...] = ()
    oom_killed: bool = False


@dataclass(frozen=True)
class Stalled:
    """The watchdog found the job stalled; ``what`` says so for people (timeout, suspects, stacks).

    ``suspects``: the tasks the stall sits in (none known: every training task). ``finished``: the lead had
    reported the end of training (``StallClock.finished``).
    """

    suspects: tuple[str, ...]
    what: str
    finished: bool
    used: Used = Used()


@dataclass(frozen=True)
class Requeued:
    """The scheduler preempted the whole job and runs it again in a new allocation (Slurm's requeue);
    ``used`` counts the preemptions before this one."""

    used: Used = Used()


#: What the rules decide about: one of the typed statuses above.
Ended: TypeAlias = Exited | Stalled | Requeued


class Member(Protocol):
    """What the rules read of a task: its name, role and reference (a plan's ``Task`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> RoleType: ...

    @property
    def ref(self) -> TaskRef: ...


@dataclass(frozen=True)
class Decider:
    """A plan's policy applied to its tasks; ``decide`` is pure."""

    policy: JobPolicy
    tasks: tuple[Member, ...]

    @classmethod
    def from_plan(cls, plan: Plan) -> Decider:
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

    def decide(self, ended: Ended) -> Decision:
        """The decision about ``ended`` (see the module contract)."""
        if isinstance(ended, Stalled):
            return self._stalled(ended)
        if isinstance(ended, Requeued):
            return self._requeued(ended)
        return self._exited(ended)

    def _exited(self, ended: Exited) -> Decision:
        name, exit_code, exited, last_error = ended.task, ended.exit_code, ended.exited, ended.last_error
        restarts_used, preemptions_used, oom_killed = ended.used.restarts, ended.used.preemptions, ended.oom_killed
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
            Failure(role=task.type, exit_code=exit_code, oom_killed=oom_killed, log_tail=ended.log_tail))
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

    def _stalled(self, ended: Stalled) -> Decision:
        """A restart is only told once training finished: it would train again from the start (its backup is
        deleted at the end of training); fail still fails."""
        suspects, restarts_used, what, finished = ended.suspects, ended.used.restarts, ended.what, ended.finished
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
        names = suspects or tuple(t.name for t in self.tasks if t.type.trains)
        group = tuple(dict.fromkeys(member for name in names for member in self.restart_group(name)))
        return Decision(Action.RESTART, restart=group,
                        message=f"stalled: {what}: restarting {listed(group)} (restart {restarts_used + 1}/{budget})")

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
            message=f"task {name} {failure}: restarting {listed(group)} "
            f"(restart {restarts_used + 1}/{budget}); last error: {last_error}",
        )

    def _requeued(self, ended: Requeued) -> Decision:
        budget, used = self.policy.max_preemptions, ended.used.preemptions
        if used >= budget:
            return Decision(Action.FAIL, message=f"preempted {used + 1} times, past restart.max_preemptions ({budget})")
        return Decision(Action.RESTART, restart=tuple(t.name for t in self.tasks),
                        message="requeued: every task restarts from the backup", preemption=True)

    def _restart_preempted(self, name: str, preemptions_used: int) -> Decision:
        budget = self.policy.max_preemptions
        group = self.restart_group(name)
        return Decision(
            Action.RESTART,
            restart=group,
            message=f"task {name} was preempted (saved): restarting {listed(group)} "
            f"(preemption {preemptions_used + 1}/{budget})",
            preemption=True,
        )


#: How many tasks a decision's message names; a larger group is named by its first ones and how many more.
NAMED_TASKS = 4


def listed(group: Sequence[str]) -> str:
    """``group``'s task names for a message: all of them up to ``NAMED_TASKS``, else the first three and a count (a
    message naming each of a thousand tasks would be 30 kB in every status)."""
    if len(group) <= NAMED_TASKS:
        return ", ".join(group)
    return f"{', '.join(group[:NAMED_TASKS - 1])} and {len(group) - NAMED_TASKS + 1} more tasks"


def decision_order(exits: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The exits of one poll round, in the order to decide them: successes, then signal deaths, then 1-127.

    Tasks that died together are decided root cause first: a killed worker
    (137) restarts the group before its peer's follow-on failure (e.g. 1) can
    fail the job under the ``exit-code`` policy.
    """
    return sorted(exits, key=lambda exit: (exit[1] != 0, exit[1] != 0 and not killed_by_signal(exit[1])))
