"""Goodput on Kubernetes: what each supervision round feeds the one accounting (``launcher.supervision.goodput``).

Contract: each round of a run's supervision (``runtime.Supervision.round``, in the supervisor pod or a launcher's
watch) calls ``account``, which folds what happened since the last round into the ``Ledger`` kept in the run's
ConfigMap (``GOODPUT_KEY``: a ``LedgerRecord``), so a replaced supervisor carries it on; nothing is kept in
memory. ``fold`` is that step, pure, in time order: the rest of the lead's previous pod's events (while that pod
can be read), each training task's pod replaced since the last round (``Ledger.disrupted`` at the old pod's end: a
preemption if its exit or condition says so, a stall if the watchdog acted on that lead pod, else a failure; a
latest pod that failed is one at its end, replaced or not), then the lead's current pod's events after the last one
folded (an ended lead pod's, before the disruptions). The run is launched when its first Job was created;
once it has ended, its end (the last training pod's finish) is kept and the record changes no more.
``status_goodput`` is the ``goodput`` ``status`` shows.
What it cannot see: a lead's events further back in its log than the lines read each round (a step missed is
covered by the next one), and pods replaced before the first round or deleted before a round saw them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel

from launcher.backends.kubernetes import apply
from launcher.backends.kubernetes.kubeapi import KubeApi, Obj
from launcher.backends.kubernetes.pods import JOB_KEY
from launcher.backends.kubernetes.stall import STALL_KEY, StallRecord
from launcher.backends.kubernetes.status import PodView, job_policy, parse_time
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.policy import JobPolicy
from launcher.protocol.events import Event
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import RoleType
from launcher.supervision.goodput import Disruption, Goodput, Ledger

#: The run's ConfigMap key holding the ``LedgerRecord``.
GOODPUT_KEY = "goodput.json"

#: The events of a pod of the lead, from its log (None: none among the lines read).
ReadEvents = Callable[[PodView], list[Event] | None]
Runs = dict[tuple[RoleType, int], list[PodView]]


class LedgerRecord(BaseModel):
    """The run's account as the last round left it, and what that round had seen."""

    ledger: Ledger
    #: Each training task's latest pod, as last seen (another one since: that task's run was replaced).
    pods: dict[str, str] = {}
    #: The lead's pod whose events were folded last, the time of the last one, and how many at that time.
    lead_pod: str = ""
    through: float | None = None
    at_through: int = 0
    #: When the run ended (the last training pod's finish), once a round saw it over.
    ended_at: float | None = None

    def goodput(self, now: float) -> Goodput:
        return self.ledger.goodput(self.ended_at if self.ended_at is not None else now)


def fold(record: LedgerRecord | None, *, cluster: str, policy: JobPolicy, launched_at: float,
         backup_every: int | None, runs: Runs, read_events: ReadEvents, stalled_pod: str, over: bool,
         now: float) -> LedgerRecord:
    """The record after one more round (see the module contract); ``backup_every``: the run's backup interval in
    steps (None: per epoch), ``stalled_pod``: the lead pod the stall watchdog acted on ("" if none), ``over``: the
    run has ended."""
    if record is None:
        record = LedgerRecord(ledger=Ledger.launched(launched_at, backup_every))
    if record.ended_at is not None:
        return record
    ledger, through, at_through = record.ledger, record.through, record.at_through
    lead_runs = runs.get((policy.lead.role, policy.lead.index), [])
    current = lead_runs[-1] if lead_runs else None
    previous = next((view for view in lead_runs if view.name == record.lead_pod), None)
    if previous is not None and current is not None and previous.name != current.name:
        ledger, through, at_through = _fold_events(ledger, read_events(previous) or [], through, at_through)
    lead_over = current is not None and current.phase in ("Failed", "Succeeded")
    if current is not None and lead_over:  # all its events came before its end: before any disruption
        ledger, through, at_through = _fold_events(ledger, read_events(current) or [], through, at_through)
    pods = dict(record.pods)
    for (role, index), views in sorted(runs.items(), key=lambda item: (item[0][0].order, item[0][1])):
        if not role.trains or not views:
            continue
        task, latest = naming.task_name(cluster, role, index), views[-1]
        before = pods.get(task)
        if before is not None and before != latest.name:
            ended = next((view for view in views if view.name == before), None)
            at = (ended.finished() if ended else None) or parse_time(latest.created) or now
            ledger = ledger.disrupted(_disruption(policy, ended, stalled_pod), at)
        if latest.phase == "Failed":  # not replaced yet, or for good (the run failed)
            ledger = ledger.disrupted(_disruption(policy, latest, stalled_pod), latest.finished() or now)
        pods[task] = latest.name
    if current is not None and not lead_over:
        ledger, through, at_through = _fold_events(ledger, read_events(current) or [], through, at_through)
    return LedgerRecord(ledger=ledger, pods=pods, lead_pod=current.name if current else record.lead_pod,
                        through=through, at_through=at_through, ended_at=_end(runs, now) if over else None)


def _end(runs: Runs, now: float) -> float:
    """When an ended run ended: its training tasks' last pods' last finish (``now`` if none says)."""
    finished = [views[-1].finished() for (role, _), views in runs.items() if role.trains and views]
    return max([at for at in finished if at is not None], default=now)


def _disruption(policy: JobPolicy, ended: PodView | None, stalled_pod: str) -> Disruption:
    """What replaced the run of ``ended`` (None: deleted before a round saw it end)."""
    if ended is None:
        return Disruption.FAILURE
    if ended.name == stalled_pod:
        return Disruption.STALL
    code = (ended.terminated() or {}).get("exitCode")
    disrupted = any(cond.get("type") == "DisruptionTarget" and cond.get("status") == "True"
                    for cond in ended.pod.get("status", {}).get("conditions") or [])
    return Disruption.PREEMPTION if disrupted or (code and policy.preempted(code)) else Disruption.FAILURE


def _fold_events(ledger: Ledger, found: Iterable[Event], through: float | None,
                 at_through: int) -> tuple[Ledger, float | None, int]:
    """``ledger`` after the events of ``found`` later than the ``at_through`` ones at ``through`` already folded."""
    seen = 0
    for event in sorted(found, key=lambda e: e.time):
        if through is not None and event.time < through:
            continue
        if through is not None and event.time == through:
            seen += 1
            if seen <= at_through:
                continue
            at_through = seen
        else:
            through, at_through, seen = event.time, 1, 1
        ledger = ledger.event(event, from_lead=True)
    return ledger, through, at_through


def launched_at(jobs: list[Obj], now: float) -> float:
    """When the run was launched: its first Job's creation."""
    created = [parse_time(job["metadata"].get("creationTimestamp")) for job in jobs]
    return min([at for at in created if at is not None], default=now)


def account(api: KubeApi, name: str, namespace: str, jobs: list[Obj], runs: Runs, over: bool, now: float,
            read_events: ReadEvents) -> None:
    """One round's feed of the run's ledger (``fold``), kept in its ConfigMap; nothing once it is gone."""
    try:
        config_map = apply.config_map(api, name, namespace)
    except LaunchError:
        return  # being deleted (``down``): nothing left to account
    record = apply.record(config_map, GOODPUT_KEY, LedgerRecord)
    if record is not None and record.ended_at is not None:
        return
    stall = apply.record(config_map, STALL_KEY, StallRecord)
    run_config = apply.record(config_map, JOB_KEY, RunConfig)
    every = run_config.backup_every_steps if run_config is not None else None
    folded = fold(record, cluster=name, policy=job_policy(jobs[0]), launched_at=launched_at(jobs, now),
                  backup_every=every if isinstance(every, int) else None, runs=runs,
                  read_events=read_events, stalled_pod=stall.pod if stall else "", over=over, now=now)
    if folded != record:
        apply.write_data(api, config_map, GOODPUT_KEY, folded.model_dump_json(), namespace)


def status_goodput(config_map: Obj | None, runs: Runs, over: bool, now: float) -> Goodput | None:
    """The run's goodput for ``status``: as the last round left it, until ``now`` (or the run's end); None before
    any round."""
    record = apply.record(config_map, GOODPUT_KEY, LedgerRecord)
    if record is None:
        return None
    return record.goodput(_end(runs, now) if over and record.ended_at is None else now)  # ended since the last round
