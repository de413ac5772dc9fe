"""The failure rules in the Kubernetes watch: the rules the Job controller cannot enforce, judged from the pods.

Contract: ``pending(policy, cluster, pods, judged)`` lists the failed pods
(a non-zero exit that is no preemption) the watch has not judged yet, each
as a ``launcher.plan.policy.Failure`` without its log lines (the backend
reads them: ``with_log``); ``OOMKilled`` is the container's terminated
reason. ``verdict(policy, failure)`` is the rule that decides it and
whether the engine enforced it already (a rule of ``JobPolicy.native_rules``
for the role: rendered in ``podFailurePolicy``), pure. The watch acts only
on a ``fail`` rule the engine could not enforce (it ends the run's Jobs, and
``FailureRecord.message`` names the rule for ``status``); a ``restart`` or
``continue`` rule it cannot enforce is only said (the Job controller
replaces the pod under its budget). ``FailureRecord`` is what the watch
keeps in the run's ConfigMap (``FAILURES_KEY``): the pods it judged and the
failure message, if any.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from launcher.backends.kubernetes.status import Obj, runs_by_task
from launcher.plan import naming
from launcher.plan.policy import Failure, JobPolicy, RuleMatch

#: The run's ConfigMap key holding the ``FailureRecord``.
FAILURES_KEY = "failures.json"
#: A container terminated with this reason was ended by the kernel's OOM killer.
OOM_REASON = "OOMKilled"


class FailureRecord(BaseModel):
    """The failed pods the watch judged by the failure rules, and the run's failure message a rule gave."""

    judged: list[str] = []
    message: str = ""


@dataclass(frozen=True)
class FailedPod:
    """A failed pod to judge: its name, task, and the failure without its log lines."""

    pod: str
    task: str
    failure: Failure

    def with_log(self, lines: list[str]) -> Failure:
        return self.failure.model_copy(update={"log_tail": tuple(lines)})


@dataclass(frozen=True)
class Verdict:
    """The rule a failure matched, and whether the engine enforced it already (``podFailurePolicy``)."""

    match: RuleMatch
    native: bool


def pending(policy: JobPolicy, cluster: str, pods: list[Obj], judged: list[str]) -> list[FailedPod]:
    """The failed pods not yet judged, in plan order (none without rules)."""
    if not policy.failure_rules:
        return []
    found = []
    for (role, index), views in sorted(runs_by_task(pods).items(), key=lambda item: (item[0][0].order, item[0][1])):
        for view in views:
            terminated = view.terminated() or {}
            code = terminated.get("exitCode")
            if view.phase != "Failed" or view.name in judged or not code or policy.preempted(code):
                continue
            failure = Failure(role=role, exit_code=code, oom_killed=terminated.get("reason") == OOM_REASON)
            found.append(FailedPod(view.name, naming.task_name(cluster, role, index), failure))
    return found


def verdict(policy: JobPolicy, failure: Failure) -> Verdict | None:
    """The first rule ``failure`` matches and whether it is one the engine enforces; None if none matches."""
    match = policy.failure_rule(failure)
    if match is None:
        return None
    return Verdict(match, match.number in {rule.number for rule in policy.native_rules(failure.role)})
