"""A small stateful fake of the Kubernetes API over real HTTP, for the kinds tfcluster uses.

The server (stdlib ``http.server`` in a thread) keeps objects and answers
like the API server: JSON CRUD for serviceaccounts, configmaps, services,
persistentvolumeclaims, pods (core/v1), jobs (batch/v1), deployments
(apps/v1), networkpolicies (networking.k8s.io/v1), roles and rolebindings
(rbac.authorization.k8s.io/v1: kept, not enforced), podgroups (scheduling.k8s.io/v1beta1: kept, no scheduler;
API discovery of that group version lists them, and both are ``404`` with ``serves_pod_groups`` unset), and the
reads of two cluster-scoped kinds, namespaces and
validatingadmissionpolicybindings (``CLUSTER_SCOPED``: kept under the namespace "", no behaviour); ``409 AlreadyExists``
on create, optimistic concurrency on replace (``resourceVersion``), ``404
NotFound``, list with an equality ``labelSelector`` and a pod's ``status.phase`` ``fieldSelector`` (another field:
``400``), whole or its objects' metadata alone (``METADATA_ONLY``), in pages (``limit``, then ``continue``: the
rest of the same list), ``422 Invalid`` for
what the API server's validation refuses in the fields tfcluster relies on
(``kubernetes_checks``: required names, containers and images, a Job's
template, ``restartPolicy``, a selector without ``manualSelector``, and the
immutability of a Job's template (unless suspended), ``completionMode`` and
``selector``); a Job created gets the selector and pod-template labels the
API server adds (``batch.kubernetes.io/controller-uid``, ``controller-uid``,
``batch.kubernetes.io/job-name``, ``job-name``).
a WATCH of a collection (``watch=true``: each change after ``resourceVersion`` as an event, bookmarks, a
410 ``Expired`` ERROR event from a version older than the history kept, ``_watch``),
``pods/<name>/log`` (with ``follow``: streamed until the pod ends),
``pods/<name>/exec`` (the websocket upgrade, then the command's stdout,
stderr and exit status on channels 1, 2 and 3; what a command gives is the
test's, ``pod_exec``: no container runs it) and
``pods/<name>/portforward``: the websocket upgrade and the
``v4.channel.k8s.io`` framing the API server speaks (per port a data and
an error channel, each opened by a frame holding the port number), bytes
relayed to the address ``pod_ports`` maps that pod's port to, standing in
for the pod's network (a closed port: the kubelet's error on the error
channel). With ``allowed`` set, a request needing another right is ``403
Forbidden`` in the RBAC authorizer's words. ``dryRun=All`` on a create validates and admits, storing nothing.
Creating a pod passes the Priority admission the API server runs (a ``priorityClassName`` that is none of
``priority_classes`` is ``403 Forbidden``; the Job controller then makes no pod), then the ServiceAccount admission
the API server runs: a pod naming an account that does not exist is
``403 Forbidden`` (only ``default`` exists unless created; to the Job
controller, which then creates no pod and tries again), and the
account's API token is mounted in every container, init containers too
(a ``kube-api-access-*`` projected volume) unless the pod's, else the
account's, ``automountServiceAccountToken`` is false.

Time is the fake's clock ``now``, which tests move; moving it, and each
request that changes something, runs the kubelet and the garbage collector
for what came due (``settle``). Deletion takes time as on a
real cluster (``delete``): a deleted running pod gets SIGTERM and its
process decides its exit code (``on_sigterm``, per task: exits 143 at once
by default; ``OnSigterm(seconds=...)`` saves for that long;
``IGNORES_SIGTERM`` is killed with 137 when ``terminationGracePeriodSeconds``
runs out, or the delete request's grace, never less than the kubelet's 2 s,
so a grace-0 deletion is SIGTERM too, not a crash; a pod in ``unreachable``,
its node gone, is never ended); ``evict`` (the Eviction API, a drain) marks
the pod ``DisruptionTarget`` before deleting it; ``Foreground`` deletion keeps
the owner, marked, until its dependents are gone, ``Orphan`` deletion leaves
them without their reference to it; a Job's pods carry the Job controller's
tracking finalizer until it counted them. A new pod requesting more CPU
than the one node has (``node_cpu``) stays ``Pending``, ``Unschedulable``
in the scheduler's words; one of an image the registry lacks
(``missing_images``) stays ``Pending`` in the kubelet's ``ImagePullBackOff``.

No controller runs by itself unless ``job_controller`` is set (then the
Job controller syncs every Job after each request that changes something,
each pod's end and each move of the clock). The test drives state through
``FakeKubernetes`` methods: ``roll_out`` stands in for the Deployment
controller, ``start_pods``/``reconcile``/``sync_jobs`` for the Job
controller (a model of a non-Indexed Job of one pod, as tfcluster renders a
task's: ``suspend``, ``startTime``, ``backoffLimit``,
``podReplacementPolicy`` and the ``SuccessCriteriaMet``/``FailureTarget``
conditions that precede ``Complete``/``Failed`` until the pods stopped),
``finish_pod`` for the kubelet.

``tests/contract/test_kubernetes_api_contract.py`` makes the same requests
of this fake and of a real cluster (``.ci/k8s.sh``'s) and checks that both
answer alike: every behaviour above that tfcluster reads is held to the real
one there (the Job conditions' reasons and messages here are the Job
controller's words, found so). Where this fake still differs from a real API
server (the one list):

- controllers run only when a test calls them, so the order of events is
  the test's; the real controllers' timing and backoff delays (the
  exponential pod backoff) are not modelled, nor Indexed Jobs, more than one
  pod at a time or one completion, ``successPolicy``,
  ``activeDeadlineSeconds`` or ``restartPolicy: OnFailure`` (tfcluster renders
  none of them); of ``podFailurePolicy`` only ``Ignore`` rules on exit codes
  (``In``) or pod conditions (the supervisor's Job's) and ``FailJob`` rules on pod conditions (a task Job's
  ``DisruptionTarget``: the Job fails, ``PodFailurePolicy``, in the Job controller's words), first match wins;
- the Deployment controller puts its one pod directly under the Deployment
  (no ReplicaSet), ready at once; Deployments, Services, NetworkPolicies and
  claims have no behaviour (no endpoints, no policy enforcement, no binding);
- only the Job's own pods are stopped gracefully; other pods deleted or
  collected go at once; every container of a pod ends with the same exit
  code; a process's answer to SIGTERM is what the test configures, not
  what a real program does;
- the scheduler is only ``node_cpu`` and ``node_memory`` (no other resources,
  affinity or taints) and ``preempt`` (what the scheduler does to a pod it
  preempts, held to the real one by the e2e test of a preemption,
  tests/e2e/test_k8s_e2e_priorities.py: a contract test would need
  PriorityClasses, an admin's); it pulls only ``missing_images``; no DNS, no
  Node objects, no ``ttlSecondsAfterFinished``;
- a lost node is a set of pods (``unreachable``), not a Node: a deleted pod
  there stays terminating (held to a Node object no kubelet serves); not held
  to the real cluster (the one node the tests share cannot show it without
  harming the other tests' pods): the scheduler's preemption and the
  ``DisruptionTarget`` reasons other than the Eviction API's
  (``finish_pod(disrupted=True)`` writes ``PreemptionByScheduler``; the
  supervisor's ``podFailurePolicy`` matches the condition, not its reason);
  the OOM killer's end and a ``Pending`` pod's status other than the two
  above are written by the test (``finish_pod(reason="OOMKilled")``,
  ``update``), not caused: their shape is the contract tests';
- a Job's status keeps only ``startTime``, ``completionTime``, the
  conditions and the counters ``succeeded`` and ``failed`` (no ``active``,
  ``ready``, ``terminating``, ``uncountedTerminatedPods``: tfcluster reads
  none of them; a task's state comes from its pod); a pod's name ends in a
  number, not the controller's random suffix;
- pods carry only the status fields tfcluster reads (phase, start time, the
  container's state, ``Ready``/``DisruptionTarget`` conditions when a test
  sets them);
- watches: every change is published to them (``publish``) when a request
  or a watch looks, so an object changed in place several times between two
  looks is one MODIFIED event, and the history is kept whole until
  ``compact`` (the API server keeps a window; a watch from "1" on a real
  cluster is 410); bookmarks come once a watch caught up, when a test asks
  (``bookmark``) and each minute of the fake's clock (the API server sends
  one about each minute and before a watch's timeout, at its discretion;
  the contract test does not wait a minute for one); ``restart`` cuts the
  watches and forgets the history at once; ``stop`` closes every connection
  (a kept-alive one unanswered, a stream without its end), as a stopped API
  server's are; ``unavailable`` answers 503 to
  every request (a restarting server mostly refuses connections); a 429 is
  only what the test injects (``fail_next``, or ``throttled``: every request,
  while set; the real server's priority and
  fairness was not made to throttle in the contract test, which needs a
  FlowSchema and a PriorityLevelConfiguration as admin; the 429's
  ``Retry-After`` header is modelled on its documented one);
- label selectors are equality only; no field selectors,
  server-side apply, ``generateName``, defaulting (e.g. of
  ``parallelism`` or ``backoffLimit``) or authentication; RBAC only as the
  set of rights ``allowed`` (one Role, one user), no ClusterRoles, bindings
  or ``resourceNames``;
- validation covers only the fields listed above; the manifests' shape is
  checked against the official OpenAPI schemas in ``test_k8s_render.py``;
- ``pods/log`` ignores ``container``, ``sinceSeconds`` and ``timestamps``;
  port-forwarding relays one port per connection; a forward to a port no one
  listens on ends the stream cleanly where the real client's socket is reset.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from fakes.kubernetes_checks import given_selector, immutable, invalid

Obj = dict[str, Any]

KINDS = {
    "serviceaccounts": "ServiceAccount",
    "configmaps": "ConfigMap",
    "services": "Service",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "pods": "Pod",
    "jobs": "Job",
    "networkpolicies": "NetworkPolicy",
    "deployments": "Deployment",
    "roles": "Role",
    "rolebindings": "RoleBinding",
    "podgroups": "PodGroup",
    "resourcequotas": "ResourceQuota",
    "namespaces": "Namespace",
    "validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding",
}
#: The group version each resource is served under, as the real API server serves it: a request under another is a 404.
SERVED_UNDER = {
    **dict.fromkeys(("serviceaccounts", "configmaps", "services", "persistentvolumeclaims", "pods", "resourcequotas",
                     "namespaces"), "api/v1"),
    "jobs": "apis/batch/v1",
    "networkpolicies": "apis/networking.k8s.io/v1",
    "deployments": "apis/apps/v1",
    **dict.fromkeys(("roles", "rolebindings"), "apis/rbac.authorization.k8s.io/v1"),
    "podgroups": "apis/scheduling.k8s.io/v1beta1",
    "validatingadmissionpolicybindings": "apis/admissionregistration.k8s.io/v1",
}
#: The cluster-scoped kinds (kept under the namespace ""): only read by tfcluster, created by tests (``create``).
CLUSTER_SCOPED = frozenset({"namespaces", "validatingadmissionpolicybindings"})
#: The API discovery document of the group version PodGroups are served in (``FakeKubernetes.serves_pod_groups``).
POD_GROUP_DISCOVERY = "/apis/scheduling.k8s.io/v1beta1"
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PORT_FORWARD_PROTOCOL = EXEC_PROTOCOL = "v4.channel.k8s.io"
#: The labels the Job controller puts on a Job's pod template (so on its pods): the Job's uid selects them.
CONTROLLER_UID_KEY = "batch.kubernetes.io/controller-uid"
JOB_NAME_KEY = "batch.kubernetes.io/job-name"
#: A Job's ``backoffLimit`` when it sets none (the API's default).
DEFAULT_BACKOFF_LIMIT = 6
#: Where the ServiceAccount admission mounts the account's API token.
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: The finalizer the Job controller puts on its pods until it has counted their end.
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
FOREGROUND_FINALIZER = "foregroundDeletion"
#: The API's default ``terminationGracePeriodSeconds``.
DEFAULT_GRACE_SECONDS = 30
#: The kubelet's least grace (``minimumGracePeriodInSeconds``): a pod deleted with less, even 0, still gets
#: SIGTERM and this long before SIGKILL, so a deletion is never a crash (137) of a process that exits on SIGTERM.
KUBELET_MINIMUM_GRACE_SECONDS = 2
SIGKILL_EXIT = 137
#: The scheduler's words for a pod no node has the memory for, even by preempting (one node, nothing to preempt).
UNSCHEDULABLE_MEMORY = ("0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: "
                        "1 No preemption victims found for incoming pod.")


@dataclass(frozen=True)
class OnSigterm:
    """What a task's process does when its pod is deleted (SIGTERM): exits ``code`` after ``seconds``.

    ``seconds=None``: it ignores SIGTERM (hangs, or saves slower than any
    grace) and the kubelet kills it (SIGKILL, 137) when the grace runs out;
    so does one that needs longer than the grace.
    """

    seconds: float | None = 0.0
    code: int = 143


#: The built-in entrypoint: saves and exits 143 at once.
SAVES_AND_EXITS = OnSigterm()
#: A hung MultiWorkerMirrored survivor: its collective never returns, SIGTERM changes nothing.
IGNORES_SIGTERM = OnSigterm(None)


class FakeKubernetes:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.pod_logs: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str]] = []
        #: Each LIST answered: (plural, its labelSelector, its fieldSelector, whether of the metadata alone).
        self.listed: list[tuple[str, str, str, bool]] = []
        #: The rest of each list answered in pages (``limit``), by its ``continue`` token: (its version, its items).
        self._continued: dict[str, tuple[int, list[Obj]]] = {}
        self._pages = itertools.count(1)
        self.deletions: list[tuple[str, str, str]] = []  # (plural, name, propagationPolicy)
        self._faults: list[tuple[str, str, int]] = []
        self._lock = threading.RLock()
        self._versions = itertools.count(1)
        self._names = itertools.count(1)
        self._now = 1_800_000_000.0  # the fake's clock, advanced by tests (``now``)
        #: Pod name prefix (a task: ``demo-worker-1``) -> what its processes do on SIGTERM; default ``SAVES_AND_EXITS``.
        self.on_sigterm: dict[str, OnSigterm] = {}
        #: (namespace, pod) -> (when, exit code): processes told to stop that have not exited yet.
        self._exits: dict[tuple[str, str], tuple[float, int]] = {}
        #: (namespace, pod, port) -> (host, port) that a port-forward to that pod's port reaches.
        self.pod_ports: dict[tuple[str, str, int], tuple[str, int]] = {}
        #: Pod name prefix (a task) -> the IP its pods get when they start (the kubelet's CNI; default 127.0.0.1).
        self.pod_ips: dict[str, str] = {}
        #: Pod name prefix (a task) -> what running a command in its container gives: (exit code, stdout, stderr).
        self.pod_exec: dict[str, Callable[[list[str]], tuple[int, str, str]]] = {}
        self._server: ThreadingHTTPServer | None = None
        #: When set, the Job controller syncs every Job after each change (a request, a pod's end, the clock
        #: moving: ``sync_jobs``), as a running controller would; unset, only when the test calls it.
        self.job_controller = False
        #: Pods whose node is gone: a deletion marks them and nothing ends them (they stay terminating).
        self.unreachable: set[str] = set()
        self._syncing = False
        self._counted: set[str] = set()  # uids of the ended pods the Job controller counted
        #: When set, RBAC as the API server's authorizer: a request needing a permission (``permission``) not in it is
        #: ``403 Forbidden`` for ``user``, in the API server's words; None: everything is allowed.
        self.allowed: set[Permission] | None = None
        self.user = "launcher"
        #: Whether the API server serves ``scheduling.k8s.io/v1beta1`` PodGroups (Kubernetes 1.37 with the
        #: ``GenericWorkload`` gate and that API on): discovery lists ``podgroups``; unset, discovery and every
        #: PodGroup request are ``404``, as where the gate is off.
        self.serves_pod_groups = True
        #: The one node's allocatable CPU: a pod requesting more is unschedulable (``_waits``).
        self.node_cpu = 64.0
        #: Images the registry does not have: a pod of one waits in the pull back-off (``_waits``).
        self.missing_images: set[str] = set()
        #: The memory of the cluster's one node (None: room for every pod): the scheduler leaves a pod requesting more
        #: ``Pending``, its ``PodScheduled`` condition ``False`` (``Unschedulable``, ``UNSCHEDULABLE_MEMORY``).
        self.node_memory: int | None = None
        #: The cluster's PriorityClasses (cluster-scoped, made by its admin): a pod naming another is refused.
        self.priority_classes: set[str] = {"system-cluster-critical", "system-node-critical"}
        #: What every watch is served from (``publish``): each change as (resourceVersion, plural, namespace, event
        #: type, the object then), and the objects as last published.
        self.history: list[tuple[int, str, str, str, Obj]] = []
        self._published: dict[tuple[str, str, str], Obj] = {}
        #: The oldest resourceVersion a watch may start from (``compact``): older is ``410 Gone``.
        self.oldest_version = 0
        #: Bookmarks asked for by the test (``bookmark``): each open watch that allows them sends one.
        self._bookmarks = 0
        #: Moves on at each ``restart``: the watches opened before it end.
        self._watch_epoch = 0
        self._closing = False
        #: While set, every request is ``503 ServiceUnavailable`` (an API server restarting, or unreachable).
        self.unavailable = False
        #: The ``Retry-After`` seconds a 429 carries (the API server's priority and fairness says 1).
        self.retry_after = "1"
        #: While set, every request is ``429 TooManyRequests`` (the API server's priority and fairness throttling).
        self.throttled = False

    # --- server ----------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            store = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def fail_next(self, method: str, plural: str, status: int) -> None:
        """The next ``method`` on ``plural`` answers ``status`` (e.g. 403; 429 as the API server's priority and
        fairness throttles, with ``Retry-After: 1``) instead of acting; a WATCH is a GET."""
        self._faults.append((method, plural, status))

    # --- watch -----------------------------------------------------------

    def publish(self) -> int:
        """Make every change since the last call an event of the watches' history (an object that changed in place
        gets a new resourceVersion then; a deleted one its deletion's own); the latest resourceVersion."""
        with self._lock:
            batch: list[tuple[int, str, str, str, Obj]] = []
            for key, obj in self.objects.items():
                before = self._published.get(key)
                if before == obj:
                    continue
                if before is not None and before["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
                    obj["metadata"]["resourceVersion"] = str(next(self._versions))
                self._published[key] = copy.deepcopy(obj)
                batch.append((int(obj["metadata"]["resourceVersion"]), key[0], key[1],
                              "ADDED" if before is None else "MODIFIED", self._published[key]))
            for key in [k for k in self._published if k not in self.objects]:
                gone = self._published.pop(key)
                gone["metadata"]["resourceVersion"] = str(next(self._versions))
                batch.append((int(gone["metadata"]["resourceVersion"]), key[0], key[1], "DELETED", gone))
            self.history.extend(sorted(batch, key=lambda entry: entry[0]))
            return self.history[-1][0] if self.history else 0

    def compact(self) -> None:
        """etcd's compaction and the watch cache's window passing: a watch from any version before the latest is
        ``410 Gone`` (``Expired``: too old resource version); a list is not affected."""
        with self._lock:
            self.oldest_version = self.publish()

    def bookmark(self) -> int:
        """Every open watch that allows bookmarks sends one at the latest version, after the events before it, as
        the API server does about once a minute (and here also each minute of the fake's clock); that version."""
        with self._lock:
            version = self.publish()
            self._bookmarks += 1
            return version

    def restart(self) -> None:
        """The API server restarts: every open watch ends abruptly (no end of the stream), and its new watch cache
        starts at the latest version (``compact``)."""
        with self._lock:
            self._watch_epoch += 1
            self.compact()

    def watches(self) -> int:
        """The WATCH requests received so far."""
        return sum(1 for method, path in self.requests if method == "GET" and "watch=true" in path)

    def lists(self, plural: str) -> int:
        """The LIST requests of ``plural`` received so far (a collection GET that is not a watch)."""
        return sum(1 for method, path in self.requests if method == "GET" and "watch=true" not in path
                   and path.split("?")[0].rstrip("/").endswith("/" + plural))

    # --- clock -----------------------------------------------------------

    @property
    def now(self) -> float:
        return self._now

    @now.setter
    def now(self, value: float) -> None:
        """Move the clock; then the kubelet and the garbage collector do what came due (``settle``)."""
        with self._lock:
            self._now = value
            self.settle()

    def settle(self) -> None:
        """What the kubelet and the garbage collector do when time passes, in this order.

        The processes told to stop whose time came exit (``_terminate``). A
        deleted pod whose process ended goes once no finalizer holds it; the
        Job controller releases its tracking finalizer when it counted the
        pod (``reconcile``) or when its Job is gone, being deleted or over.
        An object deleted in the foreground goes once nothing it owns is left.
        """
        with self._lock:
            for (namespace, name), (when, code) in sorted(self._exits.items(), key=lambda item: item[1]):
                if when <= self._now:
                    del self._exits[namespace, name]
                    self.finish_pod(name, code, namespace=namespace, at=when)
            for key, pod in list(self.objects.items()):
                meta = pod["metadata"]
                if key[0] != "pods" or not meta.get("deletionTimestamp") or _active(pod):
                    continue
                job = self._owner_job(key[1], pod)
                if job is None or job["metadata"].get("deletionTimestamp") or _finished(job):
                    _release(pod, TRACKING_FINALIZER)
                if not meta.get("finalizers"):
                    self._remove(key)
            for key, obj in list(self.objects.items()):
                meta = obj["metadata"]
                if key in self.objects and FOREGROUND_FINALIZER in meta.get("finalizers", []) and not self._dependents(meta["uid"]):
                    _release(obj, FOREGROUND_FINALIZER)
                    if not meta["finalizers"]:
                        self._remove(key)
            self._sync()

    # --- store -----------------------------------------------------------

    def stamp(self, offset: float = 0.0) -> str:
        return datetime.fromtimestamp(self.now + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def get(self, plural: str, name: str, namespace: str = "default") -> Obj | None:
        with self._lock:
            obj = self.objects.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def list(self, plural: str, namespace: str = "default", selector: dict[str, str] | None = None) -> list[Obj]:
        with self._lock:
            return [
                copy.deepcopy(obj)
                for (p, ns, _), obj in sorted(self.objects.items())
                if p == plural and ns == namespace and _matches(obj, selector or {})
            ]

    def create(self, plural: str, namespace: str, obj: Obj, dry_run: bool = False) -> Obj:
        """Create ``obj`` (validated, a pod admitted: ``_admit_pod``); ``dry_run`` (``dryRun=All``): all that,
        answering the object as it would be, storing nothing."""
        with self._lock:
            problems = invalid(plural, obj) + given_selector(plural, obj)
            if problems:
                raise _invalid(plural, (obj.get("metadata") or {}).get("name", ""), problems)
            name = obj["metadata"]["name"]
            if (plural, namespace, name) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            obj = copy.deepcopy(obj)
            if plural == "pods":
                self._admit_pod(namespace, obj)
            meta = obj["metadata"]
            meta.update(
                namespace=namespace,
                uid=f"uid-{next(self._names)}",
                resourceVersion=str(next(self._versions)),
                creationTimestamp=self.stamp(),
            )
            obj.setdefault("kind", KINDS[plural])
            obj.setdefault("status", {})
            if plural == "jobs":
                _label_job(obj)
            if dry_run:
                return obj
            self.objects[plural, namespace, name] = obj
            return copy.deepcopy(obj)

    def _admit_pod(self, namespace: str, pod: Obj) -> None:
        """The Priority admission plugin (a ``priorityClassName`` not in ``priority_classes`` is ``403 Forbidden``),
        then the ServiceAccount one (see the module docstring); changes ``pod`` in place."""
        spec = pod["spec"]
        if "priorityClassName" in spec and spec["priorityClassName"] not in self.priority_classes:
            raise ApiError(403, "Forbidden", f'pods "{pod["metadata"]["name"]}" is forbidden: no PriorityClass with '
                           f'name {spec["priorityClassName"]} was found')
        account_name = spec.setdefault("serviceAccountName", "default")
        account = self.objects.get(("serviceaccounts", namespace, account_name))
        if account is None and account_name != "default":
            raise ApiError(403, "Forbidden", f'pods "{pod["metadata"]["name"]}" is forbidden: error looking up service '
                           f'account {namespace}/{account_name}: serviceaccount "{account_name}" not found')
        automount = spec.get("automountServiceAccountToken", (account or {}).get("automountServiceAccountToken", True))
        if automount:
            volume = f"kube-api-access-{next(self._names):05d}"
            spec.setdefault("volumes", []).append({"name": volume, "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}})
            for container in spec["containers"] + spec.get("initContainers", []):
                container.setdefault("volumeMounts", []).append(
                    {"name": volume, "mountPath": TOKEN_PATH, "readOnly": True})

    def update(self, plural: str, namespace: str, name: str, change: Any) -> Obj:
        """Apply ``change(obj)`` in place (the test's controller/kubelet writes)."""
        with self._lock:
            obj = self.objects[plural, namespace, name]
            change(obj)
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
            return copy.deepcopy(obj)

    def replace(self, plural: str, namespace: str, name: str, obj: Obj) -> Obj:
        with self._lock:
            current = self.objects.get((plural, namespace, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "the object has been modified")
            problems = invalid(plural, obj) + immutable(plural, current, obj)
            if problems:
                raise _invalid(plural, name, problems)
            kept = {k: current["metadata"][k] for k in ("uid", "creationTimestamp", "namespace")}
            obj = copy.deepcopy(obj)
            obj["metadata"].update(kept, resourceVersion=str(next(self._versions)))
            obj["status"] = current.get("status", {})
            self.objects[plural, namespace, name] = obj
            return copy.deepcopy(obj)

    def patch(self, plural: str, namespace: str, name: str, change: Obj) -> Obj:
        """A JSON merge patch (RFC 7386): no resourceVersion, so never a conflict; validated as a replace is."""
        with self._lock:
            current = self.objects.get((plural, namespace, name))
            if current is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            obj = _merge(copy.deepcopy(current), change)
            problems = invalid(plural, obj) + immutable(plural, current, obj)
            if problems:
                raise _invalid(plural, name, problems)
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
            self.objects[plural, namespace, name] = obj
            return copy.deepcopy(obj)

    def delete(self, plural: str, namespace: str, name: str, propagation: str, grace: float | None = None) -> Obj:
        """Delete as the API server, the garbage collector and the kubelet do, over time (``settle``).

        A pod that runs is stopped, not removed: it gets a ``deletionTimestamp``
        (now + its grace: ``grace``, else its ``terminationGracePeriodSeconds``,
        else 30 s) and its process SIGTERM, which it answers as ``on_sigterm``
        says (``_terminate``); it goes once it exited and the Job controller
        counted it. ``Foreground``: the object stays, marked, until everything
        it owns is gone; ``Background``: it goes now and what it alone owned
        after it (``_collect_garbage``); ``Orphan``: its dependents stay.
        Deleting what is already being deleted changes nothing.
        """
        with self._lock:
            key = (plural, namespace, name)
            obj = self.objects.get(key)
            if obj is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            self.deletions.append((plural, name, propagation))
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(obj)
            if plural == "pods":
                self._terminate(namespace, obj, grace)
                if not meta.get("finalizers") and not _active(obj):
                    self._remove(key)
                return copy.deepcopy(obj)
            if propagation == "Foreground":
                meta.update(deletionTimestamp=self.stamp(), finalizers=[*meta.get("finalizers", []), FOREGROUND_FINALIZER])
                meta["resourceVersion"] = str(next(self._versions))
                for dependent in self._dependents(meta["uid"]):
                    self.delete(dependent[0], dependent[1], dependent[2], "Background")
                return copy.deepcopy(obj)
            del self.objects[key]
            if propagation == "Orphan":
                self._orphan(meta["uid"])
            else:
                self._collect_garbage(meta["uid"])
            return obj

    def _orphan(self, gone: str) -> None:
        """The garbage collector's ``Orphan`` deletion: the dependents stay, without their reference to ``gone``."""
        for other in self.objects.values():
            refs = other["metadata"].get("ownerReferences", [])
            if any(ref.get("uid") == gone for ref in refs):
                other["metadata"]["ownerReferences"] = [ref for ref in refs if ref.get("uid") != gone]
                other["metadata"]["resourceVersion"] = str(next(self._versions))

    def _remove(self, key: tuple[str, str, str]) -> None:
        obj = self.objects.pop(key)
        self._exits.pop((key[1], key[2]), None)
        self._collect_garbage(obj["metadata"]["uid"])

    def _dependents(self, uid: str) -> list[tuple[str, str, str]]:
        return [key for key, other in self.objects.items()
                if any(ref.get("uid") == uid for ref in other["metadata"].get("ownerReferences", []))]

    def _owner_job(self, namespace: str, pod: Obj) -> Obj | None:
        for ref in pod["metadata"].get("ownerReferences", []):
            job = self.objects.get(("jobs", namespace, ref.get("name", "")))
            if ref.get("kind") == "Job" and job is not None and job["metadata"]["uid"] == ref.get("uid"):
                return job
        return None

    def _terminate(self, namespace: str, pod: Obj, grace: float | None) -> None:
        """The kubelet stops a deleted pod: SIGTERM now; the process exits as ``on_sigterm`` says, or is
        killed (137) when the grace runs out, at least ``KUBELET_MINIMUM_GRACE_SECONDS`` after (a grace-0 deletion
        too). An exit that is due now happens now."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        meta.update(deletionTimestamp=self.stamp(grace), deletionGracePeriodSeconds=int(grace))
        meta["resourceVersion"] = str(next(self._versions))
        if not _active(pod):
            return
        if meta["name"] in self.unreachable:
            return
        behaviour = self._sigterm_behaviour(meta["name"])
        kill_after = max(grace, KUBELET_MINIMUM_GRACE_SECONDS)
        if behaviour.seconds is not None and behaviour.seconds <= kill_after:
            self._exits[namespace, meta["name"]] = (self._now + behaviour.seconds, behaviour.code)
        else:
            self._exits[namespace, meta["name"]] = (self._now + kill_after, SIGKILL_EXIT)
        when, code = self._exits[namespace, meta["name"]]
        if when <= self._now:
            del self._exits[namespace, meta["name"]]
            self.finish_pod(meta["name"], code, namespace=namespace)

    def _sigterm_behaviour(self, pod: str) -> OnSigterm:
        matches = [prefix for prefix in self.on_sigterm if pod.startswith(prefix + "-")]
        return self.on_sigterm[max(matches, key=len)] if matches else SAVES_AND_EXITS

    def _collect_garbage(self, gone: str) -> None:
        """The garbage collector after the object with uid ``gone`` was deleted: a dependent goes (and then
        its own dependents) once none of its owners exists any more, a running pod through ``_terminate``;
        one with another owner left only loses the reference to the deleted one."""
        uids = {other["metadata"]["uid"] for other in self.objects.values()}
        for key, other in list(self.objects.items()):
            refs = other["metadata"].get("ownerReferences", [])
            if key not in self.objects or not any(ref.get("uid") == gone for ref in refs):
                continue
            left = [ref for ref in refs if ref.get("uid") in uids]
            if left:
                other["metadata"]["ownerReferences"] = left
                other["metadata"]["resourceVersion"] = str(next(self._versions))
            elif key[0] == "pods" and _job_owned(other):
                self._terminate(key[1], other, None)
            else:
                self._remove(key)

    # --- the test's stand-ins for the Job controller and the kubelet --------

    def roll_out(self, deployment: str, namespace: str = "default") -> str:
        """The Deployment controller and kubelet: one Running, Ready pod of the template; the Deployment ready."""
        with self._lock:
            obj = self.objects["deployments", namespace, deployment]
            meta, template = obj["metadata"], copy.deepcopy(obj["spec"]["template"])
            name = f"{deployment}-{next(self._names):05d}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "labels": template["metadata"].get("labels", {}),
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment,
                                         "uid": meta["uid"], "controller": True}],
                },
                "spec": template["spec"],
            }
            self.create("pods", namespace, pod)
            container = template["spec"]["containers"][0]["name"]
            self.update("pods", namespace, name, lambda p: p["status"].update(
                phase="Running",
                conditions=[{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                containerStatuses=[{"name": container, "ready": True, "restartCount": 0,
                                    "state": {"running": {"startedAt": self.stamp()}}}],
            ))
            self.update("deployments", namespace, deployment, lambda d: d["status"].update(
                replicas=1, readyReplicas=1, availableReplicas=1, updatedReplicas=1,
            ))
            return name

    def evict(self, pod: str, namespace: str = "default") -> None:
        """The Eviction API (a drain; an administrator's right, not the launcher's Role's): the pod gets the
        condition ``DisruptionTarget`` (``EvictionByEvictionAPI``), then is deleted with its own grace (``delete``)."""
        with self._lock:
            self.update("pods", namespace, pod, lambda p: p["status"].setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "message": "Eviction API: evicting", "lastTransitionTime": self.stamp()}))
            self.delete("pods", namespace, pod, "Background")
            self.settle()

    def start_pods(self, job_name: str, namespace: str = "default") -> list[str]:
        """The Job controller's sync of one Job (``reconcile``); the names of the pods it created (none while the
        Job is suspended)."""
        with self._lock:
            before = {name for (plural, ns, name) in self.objects if plural == "pods" and ns == namespace}
            self.reconcile(job_name, namespace)
            return sorted(name for (plural, ns, name) in self.objects
                          if plural == "pods" and ns == namespace and name not in before)

    def finish_pod(self, pod: str, exit_code: int, reason: str = "", namespace: str = "default", disrupted: bool = False,
                   at: float | None = None, message: str = "") -> None:
        """The process exited (at ``at``, default now): phase Succeeded (0) or Failed, each container of the pod's
        spec terminated with ``exit_code`` (kubelet), and ``message``: what the process wrote to its termination
        log (``/dev/termination-log``). A process told to stop that exits by itself stops waiting."""
        finished = self.stamp((at if at is not None else self._now) - self._now)
        self._exits.pop((namespace, pod), None)

        def change(obj: Obj) -> None:
            obj["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            obj["status"]["containerStatuses"] = [
                {
                    "name": container["name"],
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                            **({"message": message} if message else {}),
                            "finishedAt": finished,
                        }
                    },
                }
                for container in obj["spec"]["containers"]
            ]
            if disrupted:
                obj["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]

        self.update("pods", namespace, pod, change)
        self._sync()

    def preempt(self, pod: str, reason: str = "PreemptionByScheduler", namespace: str = "default") -> None:
        """What the scheduler does to a pod it preempts for one of a higher priority (``reason``; a drain's eviction,
        ``EvictionByEvictionAPI``, and the taint manager, ``DeletionByTaintManager``, alike): the pod's
        ``DisruptionTarget`` condition, then its graceful deletion (``delete``: SIGTERM, the pod's grace)."""
        condition = {"type": "DisruptionTarget", "status": "True", "reason": reason,
                     "message": "default-scheduler: preempting to accommodate a higher priority pod",
                     "lastTransitionTime": self.stamp()}
        self.update("pods", namespace, pod, lambda obj: obj["status"].setdefault("conditions", []).append(condition))
        self.delete("pods", namespace, pod, "Background")

    def sync_jobs(self, namespace: str = "default") -> None:
        """One pass of the Job controller over every Job of ``namespace`` (``reconcile``)."""
        with self._lock:
            for plural, ns, name in list(self.objects):
                if plural == "jobs" and ns == namespace and ("jobs", ns, name) in self.objects:
                    self.reconcile(name, ns)

    def synced(self, answer: Obj) -> Obj:
        """``answer`` (a request's), after what came due with the change happened (``settle``: the kubelet, the
        garbage collector, and with ``job_controller`` set the Job controller)."""
        with self._lock:
            self.settle()
        return answer

    def _sync(self) -> None:
        """With ``job_controller`` set, the Job controller reacts to a change at once (``sync_jobs``)."""
        if not self.job_controller or self._syncing:
            return
        self._syncing = True
        try:
            for namespace in sorted({ns for (plural, ns, _) in self.objects if plural == "jobs"}):
                self.sync_jobs(namespace)
        finally:
            self._syncing = False

    def reconcile(self, job_name: str, namespace: str = "default") -> None:
        """One pass of a model of the Job controller over a non-Indexed Job of one pod (``completions`` and
        ``parallelism`` 1, ``restartPolicy: Never``), as tfcluster renders a task's Job (``manifests.task_job``).

        A Job being deleted, or over, is left alone. A suspended Job gets
        the condition ``Suspended`` and no pod; resumed, that condition turns
        ``False`` (``JobResumed``). The first sync of a Job that may run sets
        ``status.startTime`` and creates its pod. Every ended pod is counted
        (``status.succeeded``/``failed``; its tracking finalizer released; a failed pod the
        ``podFailurePolicy`` ignores is not): a
        succeeded pod completes the Job (``CompletionsReached``), more failed
        pods than ``backoffLimit`` (default 6) fail it (``BackoffLimitExceeded``),
        else a new pod replaces the failed one once no pod is active (with
        ``podReplacementPolicy: Failed`` a pod being deleted is active until
        it ended; ``TerminatingOrFailed``: until it is marked). A decided Job
        gets ``SuccessCriteriaMet`` or ``FailureTarget`` at once, its running
        pods are deleted, and ``Complete`` or ``Failed`` once none runs.
        """
        with self._lock:
            job = self.objects.get(("jobs", namespace, job_name))
            if job is None or job["metadata"].get("deletionTimestamp") or _finished(job):
                return
            if _decided(job):
                return self._conclude(job)
            spec, status = job["spec"], job["status"]
            if spec.get("suspend"):
                _set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", self.stamp())
                return
            if _has_condition(job, ("Suspended",)):
                _set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", self.stamp())
            status.setdefault("startTime", self.stamp())
            pods = self._pods_of(job)
            failing = ""  # a failed pod matched a FailJob rule: why the Job fails
            for pod in pods:
                if not _active(pod) and pod["metadata"]["uid"] not in self._counted:
                    self._counted.add(pod["metadata"]["uid"])
                    key = "succeeded" if pod["status"].get("phase") == "Succeeded" else "failed"
                    rule = None if key == "succeeded" else _policy_rule(spec, pod)
                    if rule is None or rule[1]["action"] != "Ignore":
                        status[key] = status.get(key, 0) + 1
                    if rule is not None and rule[1]["action"] == "FailJob":
                        failing = failing or (f"Pod {namespace}/{pod['metadata']['name']} has condition {rule[2]} "
                                              f"matching FailJob rule at index {rule[0]}")
                    _release(pod, TRACKING_FINALIZER)
            if failing:
                return self._decide(job, "Failed", "PodFailurePolicy", failing)
            if status.get("succeeded", 0) >= spec.get("completions", 1):
                return self._decide(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            if status.get("failed", 0) > spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT):
                return self._decide(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            terminating_counts = spec.get("podReplacementPolicy", "Failed") == "Failed"
            if not any(_active(pod) and (terminating_counts or not pod["metadata"].get("deletionTimestamp")) for pod in pods):
                self._new_pod(job)

    def _decide(self, job: Obj, outcome: str, reason: str, message: str) -> None:
        """The Job met its success or failure criteria: the interim condition, its running pods deleted."""
        interim = "SuccessCriteriaMet" if outcome == "Complete" else "FailureTarget"
        job["status"].setdefault("conditions", []).append(
            {"type": interim, "status": "True", "reason": reason, "message": message, "lastTransitionTime": self.stamp()}
        )
        namespace = job["metadata"]["namespace"]
        for key in self._dependents(job["metadata"]["uid"]):
            pod = self.objects[key]
            if key[0] == "pods" and _active(pod):
                self._terminate(namespace, pod, None)
        self._conclude(job)

    def _conclude(self, job: Obj) -> None:
        """The final condition (``Complete``/``Failed``) of a decided Job once none of its pods runs."""
        pods = [self.objects[key] for key in self._dependents(job["metadata"]["uid"]) if key[0] == "pods"]
        if any(_active(pod) for pod in pods):
            return
        interim = next(c for c in job["status"]["conditions"] if c["type"] in ("SuccessCriteriaMet", "FailureTarget"))
        outcome = "Complete" if interim["type"] == "SuccessCriteriaMet" else "Failed"
        job["status"]["conditions"].append({**interim, "type": outcome, "lastTransitionTime": self.stamp()})
        if outcome == "Complete":
            job["status"]["completionTime"] = self.stamp()
        for pod in pods:
            _release(pod, TRACKING_FINALIZER)

    def _pods_of(self, job: Obj) -> list[Obj]:
        """The Job's pods (those it controls), oldest first."""
        uid = job["metadata"]["uid"]
        pods = [pod for (plural, _, _), pod in self.objects.items()
                if plural == "pods" and any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences", []))]
        return sorted(pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))

    def _new_pod(self, job: Obj) -> str | None:
        """A pod of the Job's template (which carries the controller's labels, ``_label_job``), running at once
        unless it waits (``_waits``); None when the admission refused it."""
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        name = f"{meta['name']}-{next(self._names):05d}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": template["metadata"].get("labels", {}),
                "annotations": template["metadata"].get("annotations", {}),
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": template["spec"],
        }
        try:
            self.create("pods", meta["namespace"], pod)
        except ApiError as exc:
            if exc.code != 403:
                raise
            return None  # the admission refused it (a missing ServiceAccount): no pod; the controller tries again
        if self._waits(meta["namespace"], name):
            return name
        self.update(
            "pods",
            meta["namespace"],
            name,
            lambda obj: obj["status"].update(
                phase="Running",
                conditions=[{"type": "PodScheduled", "status": "True", "lastTransitionTime": self.stamp()}],
                podIP=next((ip for prefix, ip in self.pod_ips.items() if name.startswith(prefix)), "127.0.0.1"),
                startTime=self.stamp(),
                containerStatuses=[{"name": c["name"], "restartCount": 0, "state": {"running": {"startedAt": self.stamp()}}}
                                   for c in obj["spec"]["containers"]],
            ),
        )
        return name

    def _waits(self, namespace: str, name: str) -> bool:
        """The scheduler and the kubelet on a new pod: one whose requests no node has room for stays ``Pending``,
        unscheduled (``node_cpu``); one whose image is not in the registry (``missing_images``) stays ``Pending`` in
        the kubelet's pull back-off. Each as their status says it."""
        pod = self.objects["pods", namespace, name]
        containers = pod["spec"]["containers"]
        if self.node_memory is not None and _memory(pod) > self.node_memory:
            pod["status"].update(phase="Pending", conditions=[
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": UNSCHEDULABLE_MEMORY,
                 "lastTransitionTime": self.stamp()}])
            return True
        wanted = sum(_cpu(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")) for c in containers)
        if wanted > self.node_cpu:
            pod["status"].update(phase="Pending", conditions=[{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                           "1 No preemption victims found for incoming pod."}])
            return True
        missing = [c for c in containers if c["image"] in self.missing_images]
        if missing:
            pod["status"].update(phase="Pending", conditions=[{"type": "PodScheduled", "status": "True"}], containerStatuses=[
                {"name": c["name"], "image": c["image"], "ready": False, "restartCount": 0,
                 "state": {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{c["image"]}"'}}}
                if c in missing else {"name": c["name"], "image": c["image"], "ready": False, "restartCount": 0,
                                      "state": {"waiting": {"reason": "ContainerCreating"}}}
                for c in containers])
            return True
        return False


def _cpu(quantity: str | int | float) -> float:
    """A CPU quantity (``2``, ``0.5``, ``500m``) in cores."""
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> Obj:
        return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": self.reason, "message": self.message, "code": self.code}


def _field_selector(plural: str, selector: str) -> Callable[[Obj], bool]:
    """A list's ``fieldSelector`` as the API server takes it for the one field tfcluster selects by, a pod's
    ``status.phase`` (``=``, ``==`` or ``!=``, terms joined by commas); any other field is ``400 BadRequest``."""
    terms: list[tuple[str, bool]] = []
    for term in filter(None, selector.split(",")):
        match = re.fullmatch(r"([\w.]+)(!=|==|=)(.*)", term)
        if match is None or plural != "pods" or match[1] != "status.phase":
            raise ApiError(400, "BadRequest", f'field label not supported: {match[1] if match else term}')
        terms.append((match[3], match[2] != "!="))
    return lambda obj: all(((obj.get("status") or {}).get("phase") == value) == equal for value, equal in terms)


def _matches(obj: Obj, selector: dict[str, str]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _job_owned(obj: Obj) -> bool:
    return any(ref.get("kind") == "Job" for ref in obj["metadata"].get("ownerReferences", []))


def _has_condition(job: Obj, types: tuple[str, ...]) -> bool:
    return any(c["type"] in types and c["status"] == "True" for c in job["status"].get("conditions", []))


def _finished(job: Obj) -> bool:
    return _has_condition(job, ("Complete", "Failed"))


def _decided(job: Obj) -> bool:
    return _has_condition(job, ("SuccessCriteriaMet", "FailureTarget"))


def _set_condition(status: Obj, kind: str, value: str, reason: str, message: str, stamp: str) -> None:
    """The condition ``kind`` of a status set to ``value`` (its transition time only when the value changes)."""
    conditions = status.setdefault("conditions", [])
    current = next((c for c in conditions if c["type"] == kind), None)
    if current is not None and current["status"] == value:
        return
    if current is not None:
        conditions.remove(current)
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastProbeTime": stamp, "lastTransitionTime": stamp})


def _label_job(job: Obj) -> None:
    """What the API server adds to a Job it creates (no ``manualSelector``): a selector on its uid, and the
    labels selecting it (and naming it) on its pod template."""
    meta, spec = job["metadata"], job["spec"]
    if spec.get("manualSelector"):
        return
    labels = {CONTROLLER_UID_KEY: meta["uid"], JOB_NAME_KEY: meta["name"], "controller-uid": meta["uid"], "job-name": meta["name"]}
    spec["selector"] = {"matchLabels": {CONTROLLER_UID_KEY: meta["uid"]}}
    template_meta = spec["template"].setdefault("metadata", {})
    template_meta["labels"] = {**template_meta.get("labels", {}), **labels}


def _policy_rule(job_spec: Obj, pod: Obj) -> tuple[int, Obj, str] | None:
    """The first rule of the Job's ``podFailurePolicy`` the failed pod matches (exit codes ``In``, of the named
    container or any; pod conditions of the pattern's type and status): its index, the rule, and the condition it
    matched ("" for exit codes); None when none does."""
    for index, rule in enumerate(job_spec.get("podFailurePolicy", {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        exits = {s["state"]["terminated"]["exitCode"] for s in pod["status"].get("containerStatuses", [])
                 if codes and "terminated" in s.get("state", {}) and codes.get("containerName") in (None, s["name"])}
        conditions = {(c["type"], c.get("status")) for c in pod["status"].get("conditions", [])}
        patterns = {(c["type"], c.get("status", "True")) for c in rule.get("onPodConditions", [])}
        if codes and exits & set(codes["values"]):
            return index, rule, ""
        if matched := conditions & patterns:
            return index, rule, min(matched)[0]
    return None


def _memory(pod: Obj) -> int:
    """The bytes of memory ``pod``'s containers request (binary suffixes, as tfcluster writes them)."""
    factors = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    total = 0
    for container in pod["spec"]["containers"]:
        amount = str(container.get("resources", {}).get("requests", {}).get("memory", "0"))
        total += int(amount[:-2]) * factors[amount[-2:]] if amount[-2:] in factors else int(amount)
    return total


def _active(pod: Obj) -> bool:
    return pod["status"].get("phase", "Pending") in ("Pending", "Running")


def _release(obj: Obj, finalizer: str) -> None:
    finalizers = obj["metadata"].get("finalizers", [])
    if finalizer in finalizers:
        finalizers.remove(finalizer)


def _merge(target: Any, change: Any) -> Any:
    """RFC 7386: a dict merges key by key, ``None`` removes, anything else replaces."""
    if not isinstance(change, dict) or not isinstance(target, dict):
        return copy.deepcopy(change)
    for key, value in change.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _invalid(plural: str, name: str, problems: list[str]) -> ApiError:
    """422 Invalid, worded as the API server words it."""
    group = {"jobs": ".batch", "deployments": ".apps", "podgroups": ".scheduling.k8s.io"}
    kind = KINDS[plural] + group.get(plural, "")
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: [{", ".join(problems)}]')


#: The patch types the fake applies, both as a JSON merge patch (RFC 7386): what the backend sends.
Permission = tuple[str, str, str]  # (API group, resource, verb), as a Role's rules grant it


def permission(method: str, path: str) -> Permission:
    """The right a request needs: its API group, resource (``pods/log`` for a subresource) and verb."""
    parts = path.split("?")[0].strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) == 2 and rest[0] in CLUSTER_SCOPED:  # a cluster-scoped object read
        return group, rest[0], "get" if method == "GET" else method.lower()
    resource = rest[2] + ("/" + rest[4] if len(rest) > 4 else "")
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method) or (
        "get" if len(rest) > 3 else "watch" if "watch=true" in path else "list")
    return group, resource, verb


#: The Accept header of a list of objects' metadata alone (``PartialObjectMetadataList``).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


def _send_frame(sock: socket.socket, payload: bytes, opcode: int = 0x2) -> None:
    """One unmasked websocket frame (server to client), FIN set."""
    size = len(payload)
    if size < 126:
        header = bytes((0x80 | opcode, size))
    elif size < 1 << 16:
        header = bytes((0x80 | opcode, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 127)) + size.to_bytes(8, "big")
    try:
        sock.sendall(header + payload)
    except OSError:
        pass


def _recv_exact(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> tuple[int | None, bytes]:
    """One client frame (masked, as clients must send them): its opcode and unmasked payload; None at EOF."""
    head = _recv_exact(sock, 2)
    if head is None:
        return None, b""
    size = head[1] & 0x7F
    if size == 126:
        size = int.from_bytes(_recv_exact(sock, 2) or b"\0\0", "big")
    elif size == 127:
        size = int.from_bytes(_recv_exact(sock, 8) or bytes(8), "big")
    mask = _recv_exact(sock, 4) if head[1] & 0x80 else bytes(4)
    payload = _recv_exact(sock, size) if size else b""
    if mask is None or payload is None:
        return None, b""
    return head[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class _Handler(BaseHTTPRequestHandler):
    store: FakeKubernetes
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _route(self) -> tuple[str, str, str | None, str | None, dict[str, list[str]]]:
        url = urlparse(self.path)
        parts = url.path.strip("/").split("/")
        # api/v1/namespaces/NS/PLURAL[/NAME[/SUB]]  or  apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME[/SUB]]
        served_under, rest = ("/".join(parts[:2]), parts[2:]) if parts[0] == "api" else ("/".join(parts[:3]), parts[3:])
        if len(rest) == 2 and rest[0] in CLUSTER_SCOPED and SERVED_UNDER[rest[0]] == served_under:
            return "", rest[0], rest[1], None, parse_qs(url.query)  # api/v1/namespaces/NAME, apis/G/V/PLURAL/NAME
        if len(rest) < 3 or rest[0] != "namespaces" or SERVED_UNDER.get(rest[2]) != served_under:
            raise ApiError(404, "NotFound", f"no route {url.path}")
        namespace, plural = rest[1], rest[2]
        name = rest[3] if len(rest) > 3 else None
        sub = rest[4] if len(rest) > 4 else None
        return namespace, plural, name, sub, parse_qs(url.query)

    def _body(self) -> Obj:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _send(self, code: int, payload: Obj) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        if code == 429:
            self.send_header("Retry-After", self.store.retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        store = self.store
        if store._closing:  # stopped: a connection kept alive is closed unanswered, as by a server that is gone
            self.close_connection = True
            return
        try:
            body = self._body()  # always consumed, so a refused request leaves the connection usable
            if method == "GET" and urlparse(self.path).path.rstrip("/") == POD_GROUP_DISCOVERY:
                store.requests.append((method, self.path))
                return self._discovery()
            namespace, plural, name, sub, query = self._route()
            store.requests.append((method, self.path))
            if plural == "podgroups" and not store.serves_pod_groups:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if store.unavailable:
                raise ApiError(503, "ServiceUnavailable", "the API server is restarting")
            if store.throttled:
                raise ApiError(429, "TooManyRequests", "too many requests, please try again later")
            for fault in list(store._faults):
                if fault[:2] == (method, plural):
                    store._faults.remove(fault)
                    reason = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 429: "TooManyRequests"}.get(
                        fault[2], "InternalError")
                    raise ApiError(fault[2], reason, "too many requests, please try again later" if fault[2] == 429
                                   else "injected fault")
            self._authorize(method, namespace, plural, name)
            if method == "GET" and sub == "log":
                return self._log(namespace, name, query)
            if method == "GET" and sub == "portforward":
                return self._portforward(namespace, name, query)
            if method == "GET" and sub == "exec":
                return self._exec(namespace, name, query)
            if method == "GET" and name is None:
                selector = dict(part.split("=", 1) for part in query.get("labelSelector", [""])[0].split(",") if part)
                selector = {k.rstrip("="): v for k, v in selector.items()}
                if query.get("watch", [""])[0] == "true":
                    return self._watch(namespace, plural, selector, query)
                fields = _field_selector(plural, query.get("fieldSelector", [""])[0])
                metadata_only = self.headers.get("Accept", "") == METADATA_ONLY
                store.listed.append((plural, query.get("labelSelector", [""])[0], query.get("fieldSelector", [""])[0],
                                     metadata_only))
                with store._lock:
                    token = query.get("continue", [""])[0]
                    if token:  # the next page of the list that token continues: the same version
                        if token not in store._continued:
                            raise ApiError(400, "BadRequest", "continue key is not valid")
                        version, items = store._continued.pop(token)
                    else:
                        version = store.publish()
                        items = [obj for obj in store.list(plural, namespace, selector) if fields(obj)]
                    limit = int(query.get("limit", ["0"])[0])
                    more = ""
                    if 0 < limit < len(items):
                        more = f"page-{next(store._pages)}"
                        store._continued[more], items = (version, items[limit:]), items[:limit]
                meta = {"resourceVersion": str(version)} | ({"continue": more} if more else {})
                if metadata_only:  # metadata alone; no item at all is ``null``
                    return self._send(200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                            "metadata": meta,
                                            "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                       "metadata": obj["metadata"]} for obj in items] or None})
                return self._send(200, {"kind": KINDS[plural] + "List", "apiVersion": "v1", "metadata": meta,
                                        "items": items})
            if method == "GET":
                obj = store.get(plural, name, namespace)
                if obj is None:
                    raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
                return self._send(200, obj)
            if method == "POST" and query.get("dryRun"):
                return self._send(201, store.create(plural, namespace, body, dry_run=True))
            if method == "POST":
                return self._send(201, store.synced(store.create(plural, namespace, body)))
            if method == "PUT":
                return self._send(200, store.synced(store.replace(plural, namespace, name, body)))
            if method == "PATCH":
                # the python client's default for a dict body is a JSON patch (RFC 6902), which the store does not
                # apply: a request that is not a merge patch is refused, as the API refuses a patch it cannot read
                if self.headers.get("Content-Type", "").split(";")[0] not in MERGE_PATCH_TYPES:
                    raise ApiError(415, "UnsupportedMediaType", f"the fake applies only {', '.join(MERGE_PATCH_TYPES)}")
                return self._send(200, store.synced(store.patch(plural, namespace, name, body)))
            if method == "DELETE":
                propagation = query.get("propagationPolicy", [body.get("propagationPolicy", "Background")])[0]
                grace = query.get("gracePeriodSeconds", [body.get("gracePeriodSeconds")])[0]
                return self._send(200, store.synced(store.delete(plural, namespace, name, propagation,
                                                                 None if grace is None else float(grace))))
            raise ApiError(405, "MethodNotAllowed", method)
        except ApiError as exc:
            self._send(exc.code, exc.body())

    def _discovery(self) -> None:
        """The ``APIResourceList`` of ``POD_GROUP_DISCOVERY`` (its ``podgroups``), or 404 where it is not served."""
        if not self.store.serves_pod_groups:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._send(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "scheduling.k8s.io/v1beta1",
                         "resources": [{"name": "podgroups", "singularName": "podgroup", "namespaced": True,
                                        "kind": "PodGroup",
                                        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                                                  "update", "watch"]}]})

    def _authorize(self, method: str, namespace: str, plural: str, name: str | None) -> None:
        """``403 Forbidden`` naming the missing right, as the API server's RBAC authorizer words it."""
        group, resource, verb = needed = permission(method, self.path)
        if self.store.allowed is None or needed in self.store.allowed:
            return
        what = plural + (f".{group}" if group else "") + (f' "{name}"' if name else "")
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        raise ApiError(403, "Forbidden", f'{what} is forbidden: User "{self.store.user}" cannot {verb} resource "{resource}" '
                                         f'in API group "{group}" {scope}')

    def _watch(self, namespace: str, plural: str, selector: dict[str, str], query: dict[str, list[str]]) -> None:
        """A WATCH: each change of the matching objects after ``resourceVersion`` (``""``/``"0"``: the current ones
        first, as ADDED), a bookmark (``allowWatchBookmarks``) once it caught up, when asked (``bookmark``) and each
        minute of the fake's clock, until ``timeoutSeconds`` of the fake's
        clock passed (then the stream ends cleanly), the client leaves, or the server restarts (it ends abruptly).
        A version older than the history kept (``compact``) is an ``ERROR`` event, 410 ``Expired``, as the API
        server's watch cache answers it."""
        store = self.store
        start = query.get("resourceVersion", [""])[0]
        bookmarks = query.get("allowWatchBookmarks", ["false"])[0] == "true"
        with store._lock:
            latest = store.publish()
            ends = store.now + float(query.get("timeoutSeconds", ["1800"])[0])
            epoch, asked, minute = store._watch_epoch, -1, store.now // 60  # -1: a first bookmark once caught up
            if start in ("", "0"):
                sent = latest
                pending = [{"type": "ADDED", "object": obj} for obj in store.list(plural, namespace, selector)]
            elif int(start) < store.oldest_version:
                sent, pending = latest, [{"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Expired",
                    "message": f"too old resource version: {start} ({store.oldest_version})", "code": 410}}]
            else:
                sent, pending = int(start), []
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in pending:
                self._chunk(json.dumps(event).encode() + b"\n")
            if pending and pending[-1]["type"] == "ERROR":
                self.wfile.write(b"0\r\n\r\n")
                return
            while True:
                with store._lock:
                    if store._watch_epoch != epoch or store._closing:
                        self.close_connection = True
                        return  # restarted or stopped: no end of the stream
                    store.publish()
                    events = [{"type": kind, "object": obj} for version, p, ns, kind, obj in store.history
                              if version > sent and p == plural and ns == namespace and _matches(obj, selector)]
                    sent = max(sent, store.history[-1][0] if store.history else 0)
                    due = bookmarks and (store._bookmarks != asked or store.now // 60 != minute)
                    asked, minute, over = store._bookmarks, store.now // 60, store.now >= ends
                for event in events:
                    self._chunk(json.dumps(event).encode() + b"\n")
                if due:
                    self._chunk(json.dumps({"type": "BOOKMARK", "object": {
                        "kind": KINDS[plural], "apiVersion": "v1", "metadata": {"resourceVersion": str(sent)}}}).encode()
                                + b"\n")
                if over:
                    break
                time.sleep(0.002)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client left

    def _log(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        store = self.store
        if store.get("pods", name, namespace) is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        follow = query.get("follow", ["false"])[0] == "true"
        tail = int(query["tailLines"][0]) if "tailLines" in query else None
        sent = 0
        while True:
            if store._closing:
                self.close_connection = True
                return  # stopped: no end of the stream
            pod = store.get("pods", name, namespace)  # before the text: what an ended pod wrote is all sent
            ended = not follow or pod is None or pod["status"].get("phase") not in ("Pending", "Running")
            text = store.pod_logs.get((namespace, name), "")
            if tail is not None and not follow:
                text = "".join(text.splitlines(keepends=True)[-tail:])
            if len(text) > sent:
                self._chunk(text[sent:].encode())
                sent = len(text)
            if ended:
                break
            time.sleep(0.02)
        self.wfile.write(b"0\r\n\r\n")

    def _portforward(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        """``pods/<name>/portforward``: upgrade to a websocket, then relay the data channel (one port)."""
        if self.store.get("pods", name, namespace) is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        port = int(query["ports"][0])
        self._upgrade(PORT_FORWARD_PROTOCOL)
        client = self.connection
        opening = port.to_bytes(2, "little")
        _send_frame(client, b"\x00" + opening)  # data channel
        _send_frame(client, b"\x01" + opening)  # error channel
        target = self.store.pod_ports.get((namespace, name, port))
        try:
            upstream = socket.create_connection(target) if target else None
        except OSError:
            upstream = None
        if upstream is None:
            sandbox = hashlib.sha256(self.store.get("pods", name, namespace)["metadata"]["uid"].encode()).hexdigest()
            _send_frame(client, b"\x01" + (f"error forwarding port {port} to pod {sandbox}, uid : failed to connect to "
                                            f"localhost:{port} inside namespace \"{sandbox}\", IPv4: dial tcp4 127.0.0.1:{port}: "
                                            "connect: connection refused").encode())  # the kubelet's words: the pod's sandbox
            _send_frame(client, b"", opcode=0x8)
            return
        with upstream:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 5)
                if client in readable:
                    opcode, payload = _read_frame(client)
                    if opcode == 0x8 or opcode is None:
                        break
                    if opcode == 0x2 and payload[:1] == b"\x00":
                        upstream.sendall(payload[1:])
                if upstream in readable:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    _send_frame(client, b"\x00" + data)
        _send_frame(client, b"", opcode=0x8)

    def _exec(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        """``pods/<name>/exec``: upgrade to a websocket; the command's stdout (channel 1), stderr (2), then its
        end as a ``Status`` on the error channel (3), as the kubelet reports it; what the command gives is the
        test's (``pod_exec``; unset: the command is not found, exit 127)."""
        pod = self.store.get("pods", name, namespace)
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        if pod["status"].get("phase") != "Running":
            raise ApiError(400, "BadRequest", f"container {query.get('container', ['?'])[0]} is not running")
        self._upgrade(EXEC_PROTOCOL)
        command = query.get("command", [])
        run = next((f for prefix, f in self.store.pod_exec.items() if name.startswith(prefix)), None)
        code, stdout, stderr = run(command) if run else (127, "", f"{command[:1]}: executable file not found\n")
        client = self.connection
        if stdout:
            _send_frame(client, b"\x01" + stdout.encode())
        if stderr:
            _send_frame(client, b"\x02" + stderr.encode())
        status = {"metadata": {}, "status": "Success"} if code == 0 else {
            "metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        _send_frame(client, b"\x03" + json.dumps(status).encode())
        _send_frame(client, b"", opcode=0x8)

    def _upgrade(self, protocol: str) -> None:
        """Answer the websocket upgrade (``101``) speaking ``protocol``, or refuse it as the API server does."""
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise ApiError(400, "BadRequest", "Upgrade request required")
        protocols = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if protocol not in protocols:
            raise ApiError(400, "BadRequest", f"unsupported subprotocols {protocols}")
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")
