"""A typed client for the Kubernetes API requests tfcluster makes (the official ``kubernetes`` client underneath).

Contract: ``KubeApi`` has one method per request, for the object kinds tfcluster manages (``Kind``), each
built from the one table of where a kind lives (``ROUTES``) and sent through the client's ``ApiClient`` (its
auth, TLS, proxy and headers); objects are answered as JSON dicts (no model deserialization, and the client's
generated request classes, seconds of import, are loaded only for exec and port-forward). The request methods raise the client's
``ApiException``; this module is the one home of what an API error means: ``errors(action)`` turns any
client error into a ``LaunchError`` naming the action, the API server and its answer (a 403 says what the
Role refused), ``unless_gone`` takes a 404 as nothing to do, ``read_if_exists`` answers None for a 404,
``create_unless_exists`` and ``replace_unless_changed`` None for a 409, and ``failure_of`` says what a failed
request or stream said (its status, why, its ``Retry-After``) for the retries of a watch (``watched``: ``listing``
gives a list's ``resourceVersion``, ``watch`` a ``WatchStream`` from it). The ``kubernetes`` package is imported only when a ``KubeApi``
is made (``connect``), never at import. The kubeconfig's embedded certificates and keys (``client-key-data``) are
never written to disk: the client's file of each is an anonymous file in memory this process holds
(``_in_memory_file``), gone when the process ends, however it ends. A forked process (the detached supervisor) makes
its own (``_forget_parents_files``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from functools import partial
from typing import Any

from launcher.backends.lines import iter_lines
from launcher.backends.pyspy import Ran
from launcher.errors import BackendUnavailable, LaunchError
from launcher.protocol.stacks_signal import MAX_STACK_BYTES

Obj = dict[str, Any]
#: The longest one API discovery request may take (``serves_pod_groups``).
DISCOVERY_SECONDS = 10.0
#: The group version of PodGroups (gang placement).
SCHEDULING = "/apis/scheduling.k8s.io/v1beta1"
#: The Accept header of a list of objects' metadata alone (a ``PartialObjectMetadataList`` of ``meta.k8s.io/v1``).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
#: The most objects one page of ``listing`` holds (``limit``): a run's thousand pods or Jobs, parsed whole (some 40 KiB
#: of Python objects each), are read a page at a time, each page kept as its caller keeps it before the next is read.
LIST_PAGE = 100


class Kind(StrEnum):
    """The kinds of object tfcluster creates, reads or deletes (their ``kind`` field)."""

    SERVICE_ACCOUNT = "ServiceAccount"
    CONFIG_MAP = "ConfigMap"
    SERVICE = "Service"
    NETWORK_POLICY = "NetworkPolicy"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    JOB = "Job"
    POD = "Pod"
    DEPLOYMENT = "Deployment"
    ROLE = "Role"
    ROLE_BINDING = "RoleBinding"
    POD_GROUP = "PodGroup"


class ClusterKind(StrEnum):
    """The cluster-scoped kinds tfcluster only reads (``up``'s look at the namespace's admission: ``admission_policy``)."""

    NAMESPACE = "Namespace"
    POLICY_BINDING = "ValidatingAdmissionPolicyBinding"


#: Where each kind lives in the API: its group version's path and its resource (plural) name. The one table of routes:
#: every namespaced request below is built from it (no generated request classes, whose import alone took 2 s).
ROUTES: dict[Kind, tuple[str, str]] = {
    Kind.SERVICE_ACCOUNT: ("/api/v1", "serviceaccounts"),
    Kind.CONFIG_MAP: ("/api/v1", "configmaps"),
    Kind.SERVICE: ("/api/v1", "services"),
    Kind.NETWORK_POLICY: ("/apis/networking.k8s.io/v1", "networkpolicies"),
    Kind.PERSISTENT_VOLUME_CLAIM: ("/api/v1", "persistentvolumeclaims"),
    Kind.JOB: ("/apis/batch/v1", "jobs"),
    Kind.POD: ("/api/v1", "pods"),
    Kind.DEPLOYMENT: ("/apis/apps/v1", "deployments"),
    Kind.ROLE: ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    Kind.ROLE_BINDING: ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    Kind.POD_GROUP: (SCHEDULING, "podgroups"),
}
#: The cluster-scoped objects tfcluster reads, by kind.
CLUSTER_ROUTES: dict[ClusterKind, str] = {
    ClusterKind.NAMESPACE: "/api/v1/namespaces",
    ClusterKind.POLICY_BINDING: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
}
MERGE_PATCH = "application/merge-patch+json"


_files_in_memory: dict[bytes, str] = {}


def _in_memory_file(content: str | bytes, temp_file_path: str | None = None, force_recreate: bool = False) -> str:
    """The client's "temporary file" of an embedded certificate or key (Python's TLS reads them only from files),
    kept in memory: an anonymous file (``memfd_create``) this process holds open, named by its ``/proc/self/fd``
    path. Nothing reaches the disk, so nothing is left behind when the process ends by a signal (SIGTERM, SIGHUP, a
    kill -9), which the client's own temporary files, deleted by an exit handler, were. One per content, as the
    client's; its arguments (the directory of the file, a rewrite of a deleted file) mean nothing here."""
    data = content.encode() if isinstance(content, str) else content
    if data not in _files_in_memory:
        fd = os.memfd_create("tfcluster-kubeconfig", os.MFD_CLOEXEC)
        with open(fd, "wb", closefd=False) as file:
            file.write(data)
        _files_in_memory[data] = f"/proc/self/fd/{fd}"
    return _files_in_memory[data]


def _forget_parents_files() -> None:
    """In a forked child: forget the parent's files in memory, whose descriptors the detached child closes
    (``detach``), so its next ``connect`` makes its own."""
    _files_in_memory.clear()


os.register_at_fork(after_in_child=_forget_parents_files)


def _kubeconfig() -> str:
    """The kubeconfig kubectl reads: ``$KUBECONFIG`` (read now: the client's default is frozen when it is first
    imported; a ':' list is merged), else ``~/.kube/config``."""
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def _in_cluster(context: str | None) -> bool:
    """Whether ``context`` means the pod's own service account: none named, inside a pod."""
    return context is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def connect(context: str | None) -> Any:
    """An API client for the kubeconfig's cluster (``context``), or the in-cluster config inside a pod."""
    from kubernetes import client, config
    from kubernetes.config import kube_config

    kube_config._create_temp_file_with_content = _in_memory_file  # the one writer of the client's key copies
    where = _kubeconfig()
    try:
        if _in_cluster(context):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
        else:
            api_client = config.new_client_from_config(config_file=where, context=context)
    except (config.ConfigException, OSError) as exc:
        raise BackendUnavailable(
            f"no usable Kubernetes configuration ({where}): {exc}. Point KUBECONFIG at a kubeconfig "
            "(e.g. from your cloud's `get-credentials`), or run inside a cluster."
        ) from None
    return api_client


def context_namespace(context: str | None) -> str | None:
    """The namespace the kubeconfig's ``context`` (None: its current one) names, as kubectl takes it; None when it
    names none, in a pod without a kubeconfig, or when the kubeconfig cannot be read (``connect`` says why)."""
    from kubernetes import config

    if _in_cluster(context):
        return None
    try:
        contexts, active = config.list_kube_config_contexts(config_file=_kubeconfig())
    except (config.ConfigException, OSError):
        return None
    chosen = active if context is None else next((c for c in contexts if c.get("name") == context), None)
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return str(namespace) if namespace else None


class KubeApi:
    """The requests of one API client (``kubernetes.client.ApiClient``), typed by ``Kind`` and routed by ``ROUTES``."""

    def __init__(self, api_client: Any):
        self._client = api_client
        self._stream_lock = threading.Lock()  # the client swaps its request function while opening a stream
        self._stream_client: Any = None  # the streams' own client (``_pods``)
        self.host: str = api_client.configuration.host

    def _call(self, method: str, path: str, *, names: dict[str, str] | None = None,
              query: dict[str, Any] | None = None, body: Obj | None = None, content_type: str = "application/json",
              accept: str = "application/json", timeout: Any = None) -> Any:
        """One request, as the client's generated methods send it (its auth, TLS and headers); the urllib3 response,
        unread. ``names`` fill ``path``'s ``{...}`` (quoted); unset query values are left out. Raises ``ApiException``
        for an answer outside 2xx, as the generated methods do."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": accept} | ({"Content-Type": content_type} if body is not None else {})
        params = [(key, value) for key, value in (query or {}).items() if value is not None]
        request = self._client.param_serialize(method=method, resource_path=path, path_params=names,
                                               query_params=params, header_params=headers, body=body,
                                               auth_settings=["BearerToken"])
        response = self._client.call_api(*request, _request_timeout=timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    @staticmethod
    def _path(kind: Kind, named: bool) -> str:
        prefix, plural = ROUTES[kind]
        return f"{prefix}/namespaces/{{namespace}}/{plural}" + ("/{name}" if named else "")

    def _list(self, kind: Kind, namespace: str, *, label_selector: str, field_selector: str | None = None,
              metadata_only: bool = False, limit: int | None = None, continue_token: str | None = None,
              resource_version: str | None = None,
              allow_watch_bookmarks: bool | None = None, timeout_seconds: int | None = None, watch: bool = False,
              _request_timeout: Any = None, _preload_content: bool = False) -> Any:
        """A LIST (or, with ``watch``, a WATCH) of ``kind``: the client's ``Watch.stream`` calls it so."""
        return self._call("GET", self._path(kind, False), names={"namespace": namespace},
                          query={"labelSelector": label_selector, "fieldSelector": field_selector,
                                 "limit": limit, "continue": continue_token, "resourceVersion": resource_version,
                                 "allowWatchBookmarks": allow_watch_bookmarks, "timeoutSeconds": timeout_seconds,
                                 "watch": watch or None}, accept=METADATA_ONLY if metadata_only else "application/json",
                          timeout=_request_timeout)

    # --- requests (raise ApiException) ---------------------------------------------------------------------------

    def create(self, kind: Kind, namespace: str, body: Obj) -> Obj:
        return _json(self._call("POST", self._path(kind, False), names={"namespace": namespace}, body=body))

    def dry_run_create(self, kind: Kind, namespace: str, body: Obj) -> Obj:
        """``create`` as a server-side dry run (``dryRun=All``): validated and admitted as it would be, not stored."""
        return _json(self._call("POST", self._path(kind, False), names={"namespace": namespace}, body=body,
                                query={"dryRun": "All"}))

    def read(self, kind: Kind, name: str, namespace: str) -> Obj:
        return _json(self._call("GET", self._path(kind, True), names={"namespace": namespace, "name": name}))

    def replace(self, kind: Kind, name: str, namespace: str, body: Obj) -> Obj:
        return _json(self._call("PUT", self._path(kind, True), names={"namespace": namespace, "name": name},
                                body=body))

    def delete(self, kind: Kind, name: str, namespace: str, *, propagation: str | None = None,
               grace_seconds: int | None = None) -> Obj:
        """Delete ``name``; ``propagation`` (``Foreground``/``Background``) and ``grace_seconds`` as the API takes them."""
        return _json(self._call("DELETE", self._path(kind, True), names={"namespace": namespace, "name": name},
                                query={"propagationPolicy": propagation, "gracePeriodSeconds": grace_seconds}))

    def serves_pod_groups(self) -> bool:
        """Whether the API server serves ``scheduling.k8s.io/v1beta1`` ``podgroups`` (API discovery: one request,
        bounded by ``DISCOVERY_SECONDS``); False when that group version is not served (404)."""
        found = _unless(404, lambda: _json(self._call("GET", SCHEDULING, timeout=DISCOVERY_SECONDS)))
        return found is not None and any(r.get("name") == "podgroups" for r in found.get("resources", []))

    def read_cluster_scoped(self, kind: ClusterKind, name: str) -> Obj:
        return _json(self._call("GET", f"{CLUSTER_ROUTES[kind]}/{{name}}", names={"name": name}))

    def resource_quotas(self, namespace: str) -> list[Obj]:
        """The namespace's ResourceQuotas (``quota``: read by ``up``, never written)."""
        items: list[Obj] = _json(self._call("GET", "/api/v1/namespaces/{namespace}/resourcequotas",
                                            names={"namespace": namespace})).get("items", [])
        return items

    def select(self, kind: Kind, namespace: str, selector: str, *, fields: str | None = None,
               metadata_only: bool = False) -> list[Obj]:
        """The objects of ``kind`` whose labels match ``selector`` (and whose fields match ``fields``, a field
        selector such as ``status.phase=Pending``); ``metadata_only``: each object's ``metadata`` alone
        (``METADATA_ONLY``: a fraction of the bytes of a pod or Job, which are mostly spec and status)."""
        found = _json(self._list(kind, namespace, label_selector=selector, field_selector=fields,
                                 metadata_only=metadata_only))
        items: list[Obj] = found.get("items") or []  # a metadata list of nothing has ``"items": null``
        return items

    def listing(self, kind: Kind, namespace: str, selector: str,
                keep: Callable[[Obj], Obj] = lambda obj: obj) -> tuple[list[Obj], str]:
        """``select``, each object as ``keep`` keeps it, with the list's ``resourceVersion``: the point a watch of
        them goes on from (``watch``). Read ``LIST_PAGE`` objects at a time (``limit`` and ``continue``: the pages of
        one consistent list, its version), each page kept before the next is read: no more than a page of whole
        objects is held at once (a ``continue`` the API server no longer serves is 410, as a watch's version)."""
        kept: list[Obj] = []
        token: str | None = None
        while True:
            found = _json(self._list(kind, namespace, label_selector=selector, limit=LIST_PAGE, continue_token=token))
            kept.extend(map(keep, found.get("items") or []))
            token = found.get("metadata", {}).get("continue")
            if not token:
                return kept, str(found.get("metadata", {}).get("resourceVersion", ""))

    def watch(self, kind: Kind, namespace: str, selector: str, version: str, seconds: int,
              on_open: Callable[[], None]) -> WatchStream:
        """A watch of the objects of ``kind`` matching ``selector`` from ``version`` on, with bookmarks, that the
        API server ends after ``seconds`` (the client gives up on a silent stream ``WATCH_SLACK_SECONDS`` later);
        ``on_open`` is called once the API server accepted it (answered 200)."""
        from kubernetes import watch

        return WatchStream(watch.Watch(), partial(self._list, kind), namespace, selector, version, seconds, on_open)

    def merge_patch(self, kind: Kind, name: str, namespace: str, body: Obj) -> Obj:
        """A JSON merge patch (no resourceVersion: never a 409 with a controller's writes; a Job's suspension, a
        PodGroup's ``minCount``: ``gang.GangSize``)."""
        return _json(self._call("PATCH", self._path(kind, True), names={"namespace": namespace, "name": name},
                                body=body, content_type=MERGE_PATCH))

    def open_log(self, pod: str, namespace: str, container: str, *, follow: bool, tail: int | None = None) -> Any:
        """The response streaming ``container``'s log in ``pod`` (the caller releases it)."""
        return self._call("GET", self._path(Kind.POD, True) + "/log", names={"namespace": namespace, "name": pod},
                          query={"container": container, "follow": follow, "tailLines": tail})

    def log_lines(self, pod: str, namespace: str, container: str, *, follow: bool,
                  tail: int | None = None) -> Iterator[str]:
        """The lines of ``container``'s log (``LaunchError`` if it cannot be opened); ``follow`` until it ends."""
        with self.errors(f"read logs of {pod}"):
            response = self.open_log(pod, namespace, container, follow=follow, tail=tail)
        try:
            yield from iter_lines(response.stream(4096))
        finally:
            response.release_conn()

    def exec(self, pod: str, namespace: str, container: str, command: list[str], timeout: float) -> Ran | str:
        """``command`` run in ``container`` of ``pod`` (``pods/exec``); what it gave, or one line why not (no answer
        within ``timeout``, or more than ``MAX_STACK_BYTES`` of output: the rest is not read)."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream
        from websocket import WebSocketException

        try:
            with self._stream_lock:
                response = stream(self._pods().connect_get_namespaced_pod_exec, pod, namespace, command=command,
                                  container=container, stdin=False, stdout=True, stderr=True, tty=False,
                                  _preload_content=False)
            try:
                ends, size = time.monotonic() + timeout, 0
                out: list[str] = []
                err: list[str] = []
                while response.is_open() and size <= MAX_STACK_BYTES and (left := ends - time.monotonic()) > 0:
                    response.update(timeout=min(left, 1.0))
                    for chunks, data in ((out, response.read_stdout(timeout=0)), (err, response.read_stderr(timeout=0))):
                        chunks.append(data)
                        size += len(data)
                if size > MAX_STACK_BYTES:
                    return f"exec in pod {pod}: its output passed {MAX_STACK_BYTES} bytes; left unread"
                if response.is_open():
                    return f"exec in pod {pod} did not end within {timeout:.0f} s"
                out.append(response.read_stdout(timeout=0))
                err.append(response.read_stderr(timeout=0))
                return Ran(response.returncode, "".join(out), "".join(err))
            finally:
                response.close()
        except (ApiException, WebSocketException, OSError, ValueError, KeyError) as exc:
            reason = getattr(exc, "reason", None) or exc
            return f"exec in pod {pod} failed: {str(reason).splitlines()[0] if str(reason) else type(exc).__name__}"

    def open_forward(self, pod: str, namespace: str, port: int) -> Any:
        """A port-forward to ``port`` of ``pod`` (``pods/portforward``; the client's ``PortForward``)."""
        from kubernetes.stream import portforward

        with self._stream_lock:
            return portforward(self._pods().connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))

    def _pods(self) -> Any:
        """The client's generated core requests, for its websocket streams (exec, port-forward) only: imported on
        their first use (seconds of import no other request pays), on an API client of their own (same
        configuration): opening a stream swaps the client's request function for a while, and a request of another
        thread on a shared client then went out as a stream (a watch failed with "Missing required parameter")."""
        from kubernetes import client

        if self._stream_client is None:
            self._stream_client = client.ApiClient(self._client.configuration)
        return client.CoreV1Api(self._stream_client)

    # --- what an error means (the one home of 404, 409 and 403) ---------------------------------------------------

    @contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Turns client errors into ``LaunchError`` naming the action, the API server and its answer."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as exc:
            raise LaunchError(f"cannot {action}: {_api_reason(exc)}") from None
        except HTTPError as exc:
            raise LaunchError(f"cannot {action}: Kubernetes API at {self.host} unreachable ({exc.__class__.__name__})") from None

    @contextmanager
    def unless_gone(self, action: str) -> Iterator[None]:
        """``errors`` for a change to an object that may be gone meanwhile: a 404 needs nothing done."""
        from kubernetes.client.exceptions import ApiException

        with self.errors(action):
            try:
                yield
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def read_if_exists(self, kind: Kind, name: str, namespace: str) -> Obj | None:
        """``read``, None when there is no such object (404); other errors raise (inside the caller's ``errors``)."""
        return _unless(404, lambda: self.read(kind, name, namespace))

    def read_cluster_scoped_if_exists(self, kind: ClusterKind, name: str) -> Obj | None:
        """``read_cluster_scoped``, None when there is no such object (404); other errors raise."""
        return _unless(404, lambda: self.read_cluster_scoped(kind, name))

    def replace_unless_changed(self, kind: Kind, name: str, namespace: str, body: Obj) -> Obj | None:
        """``replace`` of ``body`` (carrying the resourceVersion it was read at): the object written; None when it
        changed since (409); other errors raise."""
        return _unless(409, lambda: self.replace(kind, name, namespace, body))

    def create_unless_exists(self, kind: Kind, namespace: str, body: Obj) -> Obj | None:
        """``create``: the object created; None when an object of that name exists (409); other errors raise."""
        return _unless(409, lambda: self.create(kind, namespace, body))


#: How long past a watch's own end the client waits for its stream before taking it as broken (a silent connection).
WATCH_SLACK_SECONDS = 30


class WatchStream:
    """One WATCH request: its events as the API server sends them (``{"type": ..., "object": {...}}`` dicts, the
    bookmarks too), unparsed into models; ``stop`` (from another thread) ends it at once: the read waiting for the
    next event is cut (the connection shut), and the events end without an error. An ``ERROR`` event (a 410 Gone:
    the version is too old) and an HTTP error (429, 403...) raise ``ApiException`` with that status."""

    def __init__(self, watcher: Any, list_request: Callable[..., Any], namespace: str, selector: str, version: str,
                 seconds: int, on_open: Callable[[], None]):
        self._stopped = False
        self._response: Any = None

        def request(*args: Any, **kwargs: Any) -> Any:  # no return type the client could parse the objects into
            response = list_request(*args, **kwargs)
            self._response = response
            if 200 <= getattr(response, "status", 0) < 300:
                on_open()
            return response

        self._watcher = watcher
        self._args = (request, namespace)
        self._kwargs = {"label_selector": selector, "resource_version": version, "allow_watch_bookmarks": True,
                        "timeout_seconds": seconds,
                        "_request_timeout": (WATCH_SLACK_SECONDS, seconds + WATCH_SLACK_SECONDS)}

    def events(self) -> Iterator[Obj]:
        # timeout_seconds set: the client's own retry after a 410 is off, so the 410 reaches the caller
        try:
            for event in self._watcher.stream(*self._args, **self._kwargs):
                yield {"type": event["type"], "object": event["raw_object"]}
        except Exception:
            if not self._stopped:
                raise  # else: the read ``stop`` cut

    def stop(self) -> None:
        self._stopped = True
        self._watcher.stop()
        response = self._response
        if response is not None:
            with suppress(ValueError, RuntimeError, OSError):  # already ended: closed, released
                response.shutdown()  # urllib3: unblocks the read waiting in another thread


def quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1e3``) as a number: the client's own parser."""
    from kubernetes.utils import parse_quantity

    parsed: Decimal = parse_quantity(value)
    return parsed


@dataclass(frozen=True)
class RequestFailure:
    """What a failed request said: its HTTP status (None: no answer, the connection failed), one line why, and the
    seconds the API server asked to wait (``Retry-After``), if it did."""

    status: int | None
    why: str
    retry_after: float | None = None


def failure_of(exc: BaseException) -> RequestFailure | None:
    """The ``RequestFailure`` an exception of a request (or of reading a stream) means; None for any other exception."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(exc, ApiException):
        try:
            retry_after = float((exc.headers or {}).get("Retry-After", ""))
        except (TypeError, ValueError):
            retry_after = None
        return RequestFailure(exc.status, f"{exc.status} {exc.reason}", retry_after)
    if isinstance(exc, (HTTPError, OSError)):
        return RequestFailure(None, f"{type(exc).__name__}: {exc}"[:200])
    return None


def _unless(status: int, request: Callable[[], Obj]) -> Obj | None:
    """What ``request`` answers; None when the API server refuses it with ``status``; other errors raise."""
    from kubernetes.client.exceptions import ApiException

    try:
        return request()
    except ApiException as exc:
        if exc.status != status:
            raise
        return None


def _json(response: Any) -> Obj:
    """A response read as JSON, its connection released."""
    try:
        answer: Obj = json.loads(response.data or b"{}")
        return answer
    finally:
        response.release_conn()


def _api_reason(exc: Any) -> str:
    try:
        body = json.loads(exc.body)
        return f"{exc.status} {body.get('reason', '')}: {body.get('message', '')}".strip()
    except (TypeError, ValueError):
        return f"{exc.status} {exc.reason}"
