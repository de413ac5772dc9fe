"""The run's pods and Jobs as the supervisor reads them: one LIST, then a WATCH, per kind (an informer's cache).

Contract: ``RunObjects(api, namespace, cluster, clock)`` keeps the objects of one run (the label
``tfcluster.io/cluster=<cluster>``: nothing else of the namespace) of two kinds, pods and Jobs, each in a
``Watched`` fed by a thread of its own: a LIST gives the objects and the ``resourceVersion`` they are at, then a
WATCH from that version (with bookmarks, which move the version on while nothing of the run changes) applies each
change. A watch the API server ends (its ``WATCH_SECONDS``) is opened again from the last version, not listed again:
in a quiet minute a run costs at most two WATCH requests per kind and no LIST. Only a ``410 Gone`` (the version
is older than the API server still keeps: etcd compacted it, or a restarted API server's new watch cache starts
later) lists again. Any other failure (the connection lost, the API server restarting, ``429`` when its priority
and fairness throttles, a ``5xx``) is retried from the last version after a pause that doubles from
``RETRY_SECONDS`` (``launcher.supervision.backoff``: up to its cap, with jitter, a ``Retry-After`` honoured;
urllib3 already waits out a few 429s by itself).

Staleness: a kind is *current* while its watch is open and every change it sent is applied; from the moment it
fails until a watch is open again (or a new LIST replaced the contents) it is *stale*, and so is one never listed
yet. ``snapshot`` answers only when both kinds are current; while one is stale it answers None (the caller must
decide nothing from the cache: no exit is read, no object taken as gone; ``not_now`` says why, as the
``backoff.NotNow`` a runtime raises, with the ``Retry-After`` the API server asked for), and once one stayed stale longer than
``STALE_SECONDS`` (measured on ``clock``) it raises ``Unreachable`` with the last error, which the supervisor
counts as an engine fault. ``last`` answers what was last seen, stale or not (which pod's log to follow).
Objects are kept trimmed (``trimmed``: no ``managedFields``; a pod without its ``spec``; a Job's ``spec`` only
``suspend``), a LIST's page trimmed before the next is read (``KubeApi.listing``), so 1,000 tasks cost about 20 MiB
(docs/kubernetes.md); a ``Snapshot`` is made again only after a
change (a poll round reads it once per task). ``requests`` counts the LIST and WATCH requests made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj, RequestFailure, WatchStream, failure_of
from launcher.backends.kubernetes.status import CONTROLLER_UID
from launcher.plan import naming
from launcher.supervision.backoff import Backoff, NotNow

#: How long the API server keeps one watch open (its ``timeoutSeconds``) before the watch is opened again.
WATCH_SECONDS = 300
#: The first pause after a failed LIST or WATCH; it doubles on each failure in a row (``backoff.Backoff``).
RETRY_SECONDS = 1.0
#: How long a kind may stay stale before ``snapshot`` raises ``Unreachable``.
STALE_SECONDS = 120.0


class Unreachable(Exception):
    """The run's objects could not be watched for longer than ``STALE_SECONDS`` (the last error)."""


def trimmed(kind: Kind, obj: Obj) -> Obj:
    """What the runtime reads of ``obj``: its metadata without ``managedFields``, its status, and of a Job's
    spec only ``suspend``."""
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    kept: Obj = {"metadata": meta, "status": obj.get("status") or {}}
    if kind is Kind.JOB:
        kept["spec"] = {"suspend": obj.get("spec", {}).get("suspend", False)}
    return kept


@dataclass
class Requests:
    """The LIST and WATCH requests one ``Watched`` made."""

    lists: int = 0
    watches: int = 0


@dataclass
class Watched:
    """The objects of one kind matching a label selector, kept by a thread (see the module contract)."""

    api: KubeApi
    kind: Kind
    namespace: str
    selector: str
    clock: Callable[[], float] = time.monotonic
    objects: dict[str, Obj] = field(default_factory=dict)
    #: The version the objects are at (the last LIST, event or bookmark); "" before the first LIST.
    version: str = ""
    requests: Requests = field(default_factory=Requests)
    #: When it became stale (``clock``), None while current; the last error, "" if none, and its ``Retry-After``.
    stale_since: float | None = None
    error: str = ""
    retry_after: float | None = None

    def __post_init__(self) -> None:
        #: Moves on at each change of ``objects`` (a snapshot is made again only then).
        self.generation = 0
        self.stale_since = self.clock()
        self.error = "not listed yet"
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.kind}", daemon=True)

    def start(self) -> Watched:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        stream = self._stream
        if stream is not None:
            stream.stop()
        self._thread.join(timeout=5)

    def get(self, name: str) -> Obj | None:
        """The object ``name`` as last seen (stale or not), None if it is not (or no longer) there."""
        with self._lock:
            return self.objects.get(name)

    def seen(self, known: int | None = None) -> tuple[int, dict[str, Obj] | None, bool]:
        """The generation, a copy of the objects by name as last seen (None if the generation is still ``known``),
        and whether they are current."""
        with self._lock:
            copied = None if known == self.generation else dict(self.objects)
            return self.generation, copied, self.stale_since is None

    def _run(self) -> None:
        backoff = Backoff(RETRY_SECONDS)
        while not self._stopped.is_set():
            try:
                if not self.version:
                    self._list()
                self._watch()
                backoff.ok()
                continue
            except Exception as exc:  # noqa: BLE001 - what it means is kubeapi's; anything else: retried, and said
                failure = failure_of(exc) or RequestFailure(None, f"{type(exc).__name__}: {exc}"[:200])
            if failure.status == 410:  # the version is too old: list again, at once
                self._stale(failure.why)
                self.version = ""
                continue
            self._stale(failure.why, failure.retry_after)
            self._stopped.wait(backoff.failed(failure.retry_after))

    def _list(self) -> None:
        self.requests.lists += 1
        items, version = self.api.listing(self.kind, self.namespace, self.selector, partial(trimmed, self.kind))
        with self._lock:
            self.objects = {item["metadata"]["name"]: item for item in items}
            self.version = version
            self.generation += 1

    def _watch(self) -> None:
        """One WATCH from ``version``, applied until the API server ends it (the kind is current meanwhile)."""
        self.requests.watches += 1
        self._stream = self.api.watch(self.kind, self.namespace, self.selector, self.version, WATCH_SECONDS,
                                      self._current)
        try:
            for event in self._stream.events():
                if self._stopped.is_set():
                    return
                self._apply(event)
        finally:
            self._stream = None

    def _apply(self, event: Obj) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata", {})
        with self._lock:
            if event.get("type") in ("ADDED", "MODIFIED"):
                self.objects[meta["name"]] = trimmed(self.kind, obj)
            elif event.get("type") == "DELETED":
                self.objects.pop(meta.get("name", ""), None)
            if event.get("type") != "BOOKMARK":
                self.generation += 1
            if meta.get("resourceVersion"):
                self.version = meta["resourceVersion"]

    def _current(self) -> None:
        with self._lock:
            self.stale_since, self.error, self.retry_after = None, "", None

    def _stale(self, why: str, retry_after: float | None = None) -> None:
        with self._lock:
            if self.stale_since is None:
                self.stale_since = self.clock()
            self.error, self.retry_after = why, retry_after


@dataclass(frozen=True)
class Snapshot:
    """The run's pods (by the uid of their Job, oldest first; and by name) and Jobs (by name) at one moment."""

    pods: dict[str, list[Obj]]
    jobs: dict[str, Obj]
    by_name: dict[str, Obj]

    @staticmethod
    def of(pods: dict[str, Obj], jobs: dict[str, Obj]) -> Snapshot:
        by_uid: dict[str, list[Obj]] = {}
        for pod in pods.values():
            uid = pod["metadata"].get("labels", {}).get(CONTROLLER_UID)
            if uid is not None:
                by_uid.setdefault(uid, []).append(pod)
        for runs in by_uid.values():
            runs.sort(key=lambda pod: (pod["metadata"].get("creationTimestamp", ""), pod["metadata"]["name"]))
        return Snapshot(by_uid, jobs, pods)

    def pod(self, name: str) -> Obj | None:
        return self.by_name.get(name)


class RunObjects:
    """The run's pods and Jobs, each kind ``Watched`` (see the module contract)."""

    def __init__(self, api: KubeApi, namespace: str, cluster: str, clock: Callable[[], float] = time.monotonic):
        selector = f"{naming.LABEL_CLUSTER}={cluster}"
        self.clock = clock
        self.kinds = {kind: Watched(api, kind, namespace, selector, clock) for kind in (Kind.POD, Kind.JOB)}
        self._made: tuple[tuple[int, int], Snapshot] | None = None  # the last snapshot, by the kinds' generations
        self._making = threading.Lock()  # one caller makes a new snapshot; the others wait for it, not make their own
        for watched in self.kinds.values():
            watched.start()

    def snapshot(self) -> Snapshot | None:
        """Both kinds as they are, None while one is stale; ``Unreachable`` once one was stale too long."""
        seen, current = self._seen()
        if current:
            return seen
        now = self.clock()
        for watched in self.kinds.values():
            since = watched.stale_since
            if since is not None and now - since > STALE_SECONDS:
                raise Unreachable(f"the run's {watched.kind}s could not be watched for {now - since:.0f} s: "
                                  f"{watched.error}")
        return None

    def not_now(self) -> NotNow:
        """Why ``snapshot`` answers None: the kinds not current, their last errors and the longest ``Retry-After``."""
        stale = [w for w in self.kinds.values() if w.stale_since is not None]
        why = "; ".join(f"the run's {w.kind}s are not watched now: {w.error}" for w in stale)
        waits = [w.retry_after for w in stale if w.retry_after is not None]
        return NotNow(why or "the run's objects are not watched now", max(waits, default=None))

    def last(self) -> Snapshot:
        """Both kinds as last seen, stale or not."""
        return self._seen()[0]

    def pod(self, name: str) -> Obj | None:
        """The pod ``name`` as last seen (stale or not): one lookup, no snapshot made (a log follower waiting for its
        pod's container asks it twice a second, a thousand followers at once while a large gang starts)."""
        return self.kinds[Kind.POD].get(name)

    def _seen(self) -> tuple[Snapshot, bool]:
        """Both kinds as last seen (made again only when one changed, by one caller at a time: a poll round reads it
        once per task), and whether both are current."""
        with self._making:
            made = self._made
            known = (None, None) if made is None else made[0]
            pods_generation, pods, pods_current = self.kinds[Kind.POD].seen(known[0])
            jobs_generation, jobs, jobs_current = self.kinds[Kind.JOB].seen(known[1])
            if made is None or pods is not None or jobs is not None:
                pods = self.kinds[Kind.POD].seen()[1] if pods is None else pods
                jobs = self.kinds[Kind.JOB].seen()[1] if jobs is None else jobs
                assert pods is not None and jobs is not None
                made = self._made = (pods_generation, jobs_generation), Snapshot.of(pods, jobs)
            return made[1], pods_current and jobs_current

    def requests(self) -> dict[Kind, Requests]:
        """The LIST and WATCH requests each kind made so far."""
        return {kind: watched.requests for kind, watched in self.kinds.items()}

    def close(self) -> None:
        for watched in self.kinds.values():
            watched.stop()
