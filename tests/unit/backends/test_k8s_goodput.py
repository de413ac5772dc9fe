"""Goodput on Kubernetes: the supervision rounds feed the one ledger, kept in the run's ConfigMap; ``status`` shows it.

Through the real client against the fake API server, as test_k8s_stall.py: the tests write the lead pod's
events (times on the fake's clock), move ``fake.now`` and act as the Job controller (``reconcile``). Each round
is made by a new backend (no memory between rounds: a replaced supervisor carries the account on).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, pod_of, write
from helpers.k8s_specs import dry_run_for, plan_for
from launcher.backends.kubernetes.goodput_ledger import LedgerRecord, fold
from launcher.backends.kubernetes.manifests import CONTAINER, INDEX_KEY
from launcher.backends.kubernetes.status import FAILURE_COUNT_KEY, PodView
from launcher.cli.report.page import render
from launcher.plan import naming
from launcher.protocol.events import Event, Restored, Started, Step
from launcher.spec.models import RoleType
from launcher.supervision.goodput import Goodput
from launcher.supervision.status import State

CHIEF, WORKER = "gp-chief-0", "gp-worker-0"


def round_then_status(fake: FakeKubernetes) -> Goodput:
    """One supervision round by a fresh backend, then the goodput ``status`` shows (by another)."""
    backend_for(fake).supervision_round("gp")
    status = backend_for(fake).describe("gp")
    assert status is not None and status.goodput is not None
    return status.goodput


def adds_up(goodput: Goodput) -> bool:
    return abs(goodput.productive_seconds + goodput.lost_seconds.total() - goodput.wall_seconds) < 0.01


def launch(fake: FakeKubernetes) -> float:
    """Cluster ``gp`` (chief + worker) running; when it was launched."""
    launched = fake.now
    backend_for(fake).submit(dry_run_for({"name": "gp", "roles": {"chief": {}, "worker": {}},
                                          "restart": {"max_restarts": 2}}))
    for job in ("gp-chief", "gp-worker"):
        fake.start_pods(job)
    return launched


def test_status_carries_goodput_from_start_up_to_a_restart_and_after_the_end(fake: FakeKubernetes) -> None:
    t0 = launch(fake)
    write(fake, CHIEF, Started(strategy="MultiWorkerMirroredStrategy", num_replicas_in_sync=2, time=t0 + 5),
          *(Step(step=n, time=t0 + 5 + n) for n in range(1, 11)))  # steps 1..10 at t0+6 .. t0+15, 1 s each
    fake.now = t0 + 20
    first = round_then_status(fake)
    assert (first.wall_seconds, first.lost_seconds.start_up, first.productive_seconds) == (20, 6, 14)
    assert adds_up(first)

    fake.finish_pod(pod_of(fake, CHIEF), 1, at=t0 + 22)  # the lead fails 7 s after its last step
    fake.now = t0 + 25
    fake.reconcile("gp-chief")
    write(fake, CHIEF, Restored(epoch=0, step=8, time=t0 + 30),  # two steps (9, 10) to do again
          *(Step(step=n, time=t0 + 22 + n) for n in range(9, 19)))  # 9..18 at t0+31 .. t0+40
    fake.now = t0 + 41
    second = round_then_status(fake)
    assert second.wall_seconds == 41
    assert second.recomputed_steps == 2
    # the 7 s since the last step before the failure were lost work, and steps 9-10 done again (1 s each)
    assert second.lost_seconds.recomputation == 7 + 2
    assert second.lost_seconds.restarts == 31 - 22 - 1  # failure -> first step after the restore, less the redo
    assert adds_up(second)

    for task in (CHIEF, WORKER):
        fake.finish_pod(pod_of(fake, task), 0, at=t0 + 45)
    fake.reconcile("gp-chief")
    fake.reconcile("gp-worker")
    fake.now = t0 + 50
    backend = backend_for(fake)
    assert backend.describe("gp").state is State.SUCCEEDED
    ended = round_then_status(fake)
    assert ended.wall_seconds == 45 and adds_up(ended)
    fake.now = t0 + 500  # later, the finished run's account stays as it ended
    assert round_then_status(fake) == ended


def test_a_preempted_task_loses_restart_time_not_work(fake: FakeKubernetes) -> None:
    t0 = launch(fake)
    write(fake, CHIEF, *(Step(step=n, time=t0 + 5 + n) for n in range(1, 6)))  # 1..5 at t0+6 .. t0+10
    fake.now = t0 + 11
    round_then_status(fake)
    fake.finish_pod(pod_of(fake, WORKER), 143, at=t0 + 12, disrupted=True)
    fake.now = t0 + 13
    fake.reconcile("gp-worker")
    write(fake, CHIEF, *(Step(step=n, time=t0 + 14 + n) for n in range(6, 8)))  # 6, 7 at t0+20, t0+21
    fake.now = t0 + 21
    goodput = round_then_status(fake)
    assert goodput.lost_seconds.recomputation == 0
    assert goodput.lost_seconds.restarts == 20 - 10  # its last step before -> its first step after: it saved
    assert adds_up(goodput)


def test_no_goodput_before_a_round_and_none_for_a_run_taken_down(fake: FakeKubernetes) -> None:
    launch(fake)
    status = backend_for(fake).describe("gp")
    assert status is not None and status.goodput is None  # nothing accounted it yet: not a made-up number
    backend_for(fake).cancel("gp")
    assert backend_for(fake).supervision_round("gp") == []


def test_report_reads_the_plan_from_the_config_map_and_every_pod_still_there(fake: FakeKubernetes) -> None:
    backend = backend_for(fake)
    backend.submit(dry_run_for({"name": "gp", "roles": {"chief": {}, "worker": {}}, "env": {"TOKEN": "s3cret"},
                                "restart": {"max_restarts": 2}}))
    for job in ("gp-chief", "gp-worker"):
        fake.start_pods(job)
    t0 = fake.now
    write(fake, CHIEF, *(Step(step=n, time=t0 + n) for n in range(1, 4)))
    fake.finish_pod(pod_of(fake, CHIEF), 1, at=t0 + 5)
    fake.now = t0 + 6
    fake.reconcile("gp-chief")
    write(fake, CHIEF, Restored(epoch=0, step=2, time=t0 + 8), Step(step=3, time=t0 + 9))
    config_map = fake.get("configmaps", "gp-tfconfig")
    assert config_map is not None and "s3cret" not in str(config_map["data"])  # never kept outside the Jobs
    history = backend_for(fake).history("gp")
    assert history is not None
    assert [task.name for task in history.plan.tasks] == [CHIEF, WORKER]
    assert history.plan.spec.env == {"TOKEN": "(hidden)"}
    # both runs of the chief: the failed pod's (kept by the Job controller) and its replacement's
    assert [(type(e).__name__, getattr(e, "step", None)) for e in history.events[CHIEF]] == [
        ("Step", 1), ("Step", 2), ("Step", 3), ("Restored", 2), ("Step", 3)]
    assert history.events[WORKER] == []
    assert history.status["name"] == "gp"
    page = render(history)
    assert "plan-task" in page and CHIEF in page and "s3cret" not in page
    assert backend_for(fake).history("nope") is None


def pod(name: str, role: str, index: int, failures: int, **status: Any) -> PodView:
    """A pod of a task as the API shows it (``status``: its phase, container statuses, conditions)."""
    return PodView({"metadata": {"name": name, "labels": {naming.LABEL_ROLE: role, INDEX_KEY: str(index)},
                                 "annotations": {FAILURE_COUNT_KEY: str(failures)},
                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "status": {"phase": "Running", **status}})


def ended(name: str, at: float, code: int) -> PodView:
    stamp = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    return pod(name, "chief", 0, 0, phase="Failed", containerStatuses=[
        {"name": CONTAINER, "state": {"terminated": {"exitCode": code, "finishedAt": stamp}}}])


POLICY = plan_for({"name": "gp", "roles": {"chief": {}}}).policy
T0 = 1_000_000.0


def test_a_restart_by_the_stall_watchdog_is_accounted_as_a_stall_and_no_event_is_folded_twice() -> None:
    logs: dict[str, list[Event]] = {"p1": [Step(step=1, time=T0 + 2), Step(step=2, time=T0 + 2)]}

    def fold_at(record: LedgerRecord | None, runs: list[PodView], now: float) -> LedgerRecord:
        return fold(record, cluster="gp", policy=POLICY, launched_at=T0, backup_every=None,
                    runs={(RoleType.CHIEF, 0): runs}, read_events=lambda view: logs.get(view.name),
                    stalled_pod="p1", over=False, now=now)

    first = fold_at(None, [pod("p1", "chief", 0, 0)], T0 + 3)
    logs["p1"].append(Step(step=3, time=T0 + 2))  # a third report at the same second, read by the next round
    again = fold_at(first, [pod("p1", "chief", 0, 0)], T0 + 4)
    assert (again.ledger.step, again.ledger.reached) == (3, 3)
    assert fold_at(again, [pod("p1", "chief", 0, 0)], T0 + 5) == again  # nothing new: nothing folded again
    logs["p2"] = [Step(step=4, time=T0 + 30)]
    replaced = fold_at(again, [ended("p1", T0 + 20, 137), pod("p2", "chief", 0, 1)], T0 + 31)
    goodput = replaced.goodput(T0 + 31)
    assert goodput.lost_seconds.stalls == 20 - 2  # its last step until the watchdog's restart ended it
    assert goodput.lost_seconds.restarts == 30 - 20 and goodput.lost_seconds.recomputation == 0


def test_a_lead_that_failed_for_good_loses_the_work_since_its_last_step() -> None:
    logs = {"p1": [Step(step=1, time=T0 + 2), Step(step=2, time=T0 + 4)]}
    record = fold(None, cluster="gp", policy=POLICY, launched_at=T0, backup_every=None,
                  runs={(RoleType.CHIEF, 0): [ended("p1", T0 + 10, 1)]}, read_events=lambda view: logs.get(view.name),
                  stalled_pod="", over=True, now=T0 + 50)
    goodput = record.goodput(T0 + 60)
    assert goodput.wall_seconds == 10  # the run ended with its pod
    assert (goodput.lost_seconds.start_up, goodput.lost_seconds.recomputation, goodput.productive_seconds) == (2, 6, 2)
