"""How the Kubernetes runtime reads the API (``launcher.backends.kubernetes.watched``): one LIST then a WATCH per kind,
against the fake API server, whose watches keep resourceVersions, send bookmarks, answer 410 Gone from a compacted
version, and which can throttle (429) or be down (503, its watches cut: a restart).

The requests are counted by the fake. The supervisor's time is the fake's clock (its pause moves it); the watches
are threads, so a test waits (bounded, on a condition) for what it expects to be seen, never for a wall-clock time.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, caught_up, pod_of
from helpers.k8s_specs import dry_run_for
from helpers.polling import wait_for_condition
from launcher.backends.kubernetes import apply, kubeapi, watched
from launcher.backends.kubernetes.kubeapi import Kind
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.backends.kubernetes.watched import Unreachable, trimmed
from launcher.plan.planner import Plan, Task
from launcher.supervision.backoff import NotNow
from launcher.supervision.status import State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

WORKERS = 20
SPEC: dict[str, Any] = {"name": "wq", "roles": {"chief": {}, "worker": {"replicas": WORKERS}},
                        "kubernetes": {"supervisor": False}}


def applied(fake: FakeKubernetes) -> tuple[Plan, KubernetesRuntime]:
    """The run applied (its Jobs run by the fake's controller) and a runtime on the fake's clock."""
    fake.job_controller = True
    dry_run = dry_run_for(SPEC)
    api = backend_for(fake).api
    apply.submit(api, dry_run, "default")
    return dry_run.plan, KubernetesRuntime(api, dry_run.plan, "default", clock=lambda: fake.now,
                                           pause=lambda seconds: setattr(fake, "now", fake.now + seconds))


def started(fake: FakeKubernetes) -> tuple[Plan, KubernetesRuntime]:
    """The run applied, every task started, and a runtime whose watches are current."""
    plan, runtime = applied(fake)
    for task in plan.tasks:
        runtime.start(task)
    caught_up(fake, runtime.objects)
    return plan, runtime


def polled(runtime: KubernetesRuntime, task: Task, code: int) -> None:
    """Until ``poll`` reads ``code`` (the watch's thread delivers the change; ``NotNow`` while it is stale)."""
    wait_for_condition(lambda: answer(runtime, task) == code)


def answer(runtime: KubernetesRuntime, task: Task) -> int | None | NotNow:
    """What ``poll`` answers, or the ``NotNow`` it raises."""
    try:
        return runtime.poll(task)
    except NotNow as not_now:
        return not_now


def lists(fake: FakeKubernetes) -> int:
    return fake.lists("pods") + fake.lists("jobs")


def test_a_quiet_minute_of_supervision_costs_no_list_and_no_request_per_task(fake: FakeKubernetes) -> None:
    """The supervisor starts the run's 21 tasks, then polls every task each 0.5 s: in a minute of the fake's clock
    (120 rounds) at most 12 LIST requests of pods and Jobs (the goal; here none: the watches opened before it), and
    no GET of a task's Job or pod. Before the cache it listed the pods at every round (120)."""
    plan, runtime = applied(fake)
    rounds, marks = 0, []
    supervisor: Supervisor

    def pause(seconds: float) -> None:
        nonlocal rounds
        rounds += 1
        if rounds in (10, 130):
            if rounds == 10:
                caught_up(fake, runtime.objects)
            marks.append((lists(fake), len(fake.requests)))
        if rounds == 130:
            supervisor.cancel()
        fake.now += seconds

    supervisor = Supervisor(plan, runtime,
                            tuning=Tuning(poll_seconds=0.5, linger_seconds=0.0, pause=pause, clock=lambda: fake.now))
    try:
        assert supervisor.run().state is State.CANCELLED
    finally:
        runtime.close()
    (lists_before, since), (lists_after, until) = marks
    assert lists_after - lists_before <= 12
    assert lists_after == lists_before  # the watches serve it all
    assert [p for m, p in fake.requests[since:until] if "watch=true" not in p and "/log" not in p] == []
    counted = runtime.objects.requests()  # what the runtime says it sent, as the fake counted it
    assert counted[Kind.POD].lists == counted[Kind.JOB].lists == 1
    assert sum(c.watches for c in counted.values()) == fake.watches()


def test_a_pod_deleted_among_many_is_seen_from_the_watch_without_a_list(fake: FakeKubernetes) -> None:
    plan, runtime = started(fake)
    worker = next(t for t in plan.tasks if t.name == "wq-worker-7")
    before = lists(fake)
    try:
        assert runtime.poll(worker) is None
        assert runtime.objects.snapshot() is runtime.objects.snapshot()  # made again only after a change
        fake.delete("pods", "default", pod_of(fake, worker.name), "Background")  # SIGTERM: exits 143, goes
        wait_for_condition(lambda: runtime.poll(worker) is not None)
        assert all(runtime.poll(t) is None for t in plan.tasks if t is not worker)
    finally:
        runtime.close()
    assert lists(fake) == before


def test_a_watch_from_a_compacted_version_lists_again_and_misses_nothing(fake: FakeKubernetes) -> None:
    """The API server restarts: the watches are cut, it is down a while, meanwhile a pod ends and etcd compacts:
    the watch from the last version is 410 Gone, so each kind lists once more, and the pod's end is read. While
    down, ``poll`` decides nothing (None), never a lost run."""
    plan, runtime = started(fake)
    worker = next(t for t in plan.tasks if t.name == "wq-worker-3")
    before = {plural: fake.lists(plural) for plural in ("pods", "jobs")}
    try:
        fake.unavailable = True
        fake.restart()
        wait_for_condition(lambda: runtime.objects.snapshot() is None)  # stale: the watch broke
        fake.finish_pod(pod_of(fake, worker.name), 5)
        fake.compact()
        for task in plan.tasks:  # stale: nothing decided
            with pytest.raises(NotNow, match="not watched now"):
                runtime.poll(task)
        fake.unavailable = False
        polled(runtime, worker, 5)
    finally:
        runtime.close()
    assert {plural: fake.lists(plural) - before[plural] for plural in ("pods", "jobs")} == {"pods": 1, "jobs": 1}


def test_a_throttled_watch_backs_off_and_goes_on_from_its_version(fake: FakeKubernetes,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """429 (priority and fairness throttling) on the watch opened again: urllib3 waits out three by itself
    (``Retry-After``), the watch backs off for the rest, then goes on from its version: no LIST; a pod that ended
    meanwhile is read."""
    monkeypatch.setattr(watched, "RETRY_SECONDS", 0.01)
    fake.retry_after = "0"
    plan, runtime = started(fake)
    worker = next(t for t in plan.tasks if t.name == "wq-worker-1")
    before, watches = lists(fake), fake.watches()
    try:
        for _ in range(8):
            fake.fail_next("GET", "pods", 429)
        fake.restart()  # cuts the watches (nothing compacted that they have not seen)
        fake.finish_pod(pod_of(fake, worker.name), 2)
        polled(runtime, worker, 2)
    finally:
        runtime.close()
    assert lists(fake) == before
    assert fake.watches() - watches >= 1 + 2  # the pods' watch tried again after the throttled tries
    assert not [f for f in fake._faults if f[2] == 429]  # every 429 was met


def test_a_cache_stale_past_its_bound_is_an_engine_fault_naming_why(fake: FakeKubernetes) -> None:
    plan, runtime = started(fake)
    try:
        fake.unavailable = True
        fake.restart()
        wait_for_condition(lambda: runtime.objects.snapshot() is None)
        fake.now += watched.STALE_SECONDS + 1
        with pytest.raises(Unreachable, match=r"could not be watched for \d+ s: "):
            runtime.poll(plan.tasks[0])
    finally:
        runtime.close()


def test_the_cache_keeps_only_what_the_runtime_reads() -> None:
    pod = {"metadata": {"name": "p", "managedFields": [{"x": 1}], "labels": {"a": "b"}}, "spec": {"containers": []},
           "status": {"phase": "Running"}}
    job = {"metadata": {"name": "j"}, "spec": {"suspend": True, "template": {}}, "status": {}}
    assert trimmed(Kind.POD, pod) == {"metadata": {"name": "p", "labels": {"a": "b"}}, "status": {"phase": "Running"}}
    assert trimmed(Kind.JOB, job) == {"metadata": {"name": "j"}, "status": {}, "spec": {"suspend": True}}


def test_adopt_waits_for_the_first_listing_so_the_next_poll_reads_an_end_that_came_unsupervised(
        fake: FakeKubernetes) -> None:
    """A new supervisor adopts: its cache is listed before ``adopt`` answers, so a poll right after reads the pod's
    end (the supervisor starts such a task again rather than judging its exit)."""
    plan, first = started(fake)
    first.close()
    worker = next(t for t in plan.tasks if t.name == "wq-worker-2")
    fake.finish_pod(pod_of(fake, worker.name), 4)
    successor = KubernetesRuntime(backend_for(fake).api, plan, "default")  # its own clock: real time
    try:
        assert successor.adopt(worker) is True
        assert successor.poll(worker) == 4
    finally:
        successor.close()


def test_a_watch_stopped_while_it_waits_for_the_next_event_ends_at_once_and_quietly(fake: FakeKubernetes) -> None:
    """``WatchStream.stop`` from another thread cuts the read waiting for the next event (a quiet run sends none
    for minutes): the events end without an error, and a closed runtime's watch threads end with it."""
    api = backend_for(fake).api
    _, version = api.listing(Kind.POD, "default", "tfcluster.io/cluster=quiet")
    opened = threading.Event()
    stream = api.watch(Kind.POD, "default", "tfcluster.io/cluster=quiet", version, 300, opened.set)
    ended: list[object] = []

    def read() -> None:
        try:
            ended.append(list(stream.events()))
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            ended.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    assert opened.wait(30)
    stream.stop()
    thread.join(timeout=30)  # the watch's own end is 300 s away
    assert not thread.is_alive() and isinstance(ended[0], list), ended
    assert {event["type"] for event in ended[0]} <= {"BOOKMARK"}  # nothing of the run changed


def test_a_kind_is_listed_in_pages_each_trimmed_before_the_next_is_read(fake: FakeKubernetes,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand tasks' pods are never parsed whole at once (some 40 KiB of Python objects each, memory the
    supervisor pod keeps): the LIST is read ``LIST_PAGE`` objects at a time, the pages of one list (its version),
    and each page is trimmed before the next is read."""
    _, runtime = started(fake)
    runtime.close()
    monkeypatch.setattr(kubeapi, "LIST_PAGE", 5)
    pages_read_at_trim: list[int] = []

    def pod_pages() -> int:
        return sum(1 for method, path in fake.requests if "/pods?" in path and "limit=5" in path)

    def spied(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        if kind is Kind.POD:
            pages_read_at_trim.append(pod_pages())
        return trimmed(kind, obj)

    monkeypatch.setattr(watched, "trimmed", spied)
    objects = watched.RunObjects(backend_for(fake).api, "default", "wq", lambda: fake.now)
    try:
        caught_up(fake, objects)
        seen = objects.snapshot()
        assert seen is not None and len(seen.by_name) == WORKERS + 1
    finally:
        objects.close()
    assert pod_pages() == 5 and pages_read_at_trim == sorted(pages_read_at_trim)
    assert set(pages_read_at_trim) == {1, 2, 3, 4, 5}  # page n trimmed before page n + 1 was asked for


def test_many_readers_after_a_change_make_one_snapshot_and_a_pod_read_by_name_makes_none(
        fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand-task gang starting: each task's log follower asks for its pod twice a second while every pod event
    changes the cache. A snapshot (every pod and Job, copied and sorted) is made once per change, whoever asks; a
    follower's read of its one pod makes none. (Each caller made its own: 847 followers starved the supervisor's
    main thread at 1,000 simulated tasks, which then acted on nothing for minutes.)"""
    plan, runtime = started(fake)
    runtime.close()
    made: list[int] = []
    real_of = watched.Snapshot.of

    def counted(pods: dict[str, Any], jobs: dict[str, Any]) -> watched.Snapshot:
        made.append(1)
        gate.wait(5)  # every reader arrives while the first one makes it
        return real_of(pods, jobs)

    gate = threading.Event()
    monkeypatch.setattr(watched.Snapshot, "of", staticmethod(counted))
    objects = watched.RunObjects(backend_for(fake).api, "default", "wq", lambda: fake.now)
    try:
        caught_up(fake, objects)
        readers = [threading.Thread(target=objects.last) for _ in range(20)]
        for reader in readers:
            reader.start()
        wait_for_condition(lambda: made)
        gate.set()
        for reader in readers:
            reader.join(10)
        assert len(made) == 1
        pod = pod_of(fake, f"wq-worker-{WORKERS - 1}")
        fake.finish_pod(pod, 1)  # a change: the next snapshot is a new one
        caught_up(fake, objects)
        found = objects.pod(pod)
        assert found is not None and found["metadata"]["name"] == pod and len(made) == 1
        assert objects.pod("no-such-pod") is None
        assert objects.last().pod(pod) == found and len(made) == 2
    finally:
        objects.close()
