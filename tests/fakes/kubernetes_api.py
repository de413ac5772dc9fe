"""A small stateful fake of the Kubernetes API over real HTTP, for the kinds tfcluster uses.

The server (stdlib ``http.server`` in a thread) keeps objects and answers
like the API server: JSON CRUD for serviceaccounts, configmaps, services,
persistentvolumeclaims, pods (core/v1), jobs (batch/v1) and networkpolicies
(networking.k8s.io/v1); ``409 AlreadyExists`` on create, optimistic
concurrency on replace (``resourceVersion``), ``404 NotFound``, list with an
equality ``labelSelector``, delete cascading to owned objects unless
``propagationPolicy=Orphan`` (as the garbage collector: an object with
several owners goes with the last of them; a Job's running pod is killed,
not removed: see ``delete``), ``pods/<name>/log`` (with ``follow``:
streamed until the pod ends), deployments (apps/v1), and
``pods/<name>/portforward``: the websocket upgrade and the
``v4.channel.k8s.io`` framing the API server speaks (per port a data and
an error channel, each opened by a frame holding the port number), bytes
relayed to the address ``pod_ports`` maps that pod's port to, standing in
for the pod's network. Creating a pod passes the ServiceAccount admission
the API server runs: a pod naming an account that does not exist is
``403 Forbidden`` (only ``default`` exists unless created), and the
account's API token is mounted in every container, init containers too
(a ``kube-api-access-*`` projected volume) unless the pod's, else the
account's, ``automountServiceAccountToken`` is false.

No controllers run by themselves. The test drives state through
``FakeKubernetes`` methods: ``roll_out`` stands in for the Deployment
controller (one ready pod, owned directly by the Deployment where the real
one puts a ReplicaSet in between), ``start_pods`` and ``reconcile`` for the
Job controller (a model of the documented semantics of
``backoffLimitPerIndex``, ``maxFailedIndexes``, ``podFailurePolicy`` and
``successPolicy``, not the real controller), ``finish_pod`` for the kubelet.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import select
import socket
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

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
}
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PORT_FORWARD_PROTOCOL = "v4.channel.k8s.io"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"
#: Where the ServiceAccount admission mounts the account's API token.
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


class FakeKubernetes:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.pod_logs: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str]] = []
        self.deletions: list[tuple[str, str, str]] = []  # (plural, name, propagationPolicy)
        self._faults: list[tuple[str, str, int]] = []
        self._lock = threading.RLock()
        self._versions = itertools.count(1)
        self._names = itertools.count(1)
        self.now = 1_800_000_000.0  # the fake's clock, advanced by tests
        #: (namespace, pod, port) -> (host, port) that a port-forward to that pod's port reaches.
        self.pod_ports: dict[tuple[str, str, int], tuple[str, int]] = {}
        self._server: ThreadingHTTPServer | None = None

    # --- server ----------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(_Handler):
            store = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def fail_next(self, method: str, plural: str, status: int) -> None:
        """The next ``method`` on ``plural`` answers ``status`` (e.g. 403) instead of acting."""
        self._faults.append((method, plural, status))

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

    def create(self, plural: str, namespace: str, obj: Obj) -> Obj:
        with self._lock:
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
            self.objects[plural, namespace, name] = obj
            return copy.deepcopy(obj)

    def _admit_pod(self, namespace: str, pod: Obj) -> None:
        """The ServiceAccount admission plugin (see the module docstring); changes ``pod`` in place."""
        spec = pod["spec"]
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
            kept = {k: current["metadata"][k] for k in ("uid", "creationTimestamp", "namespace")}
            obj = copy.deepcopy(obj)
            obj["metadata"].update(kept, resourceVersion=str(next(self._versions)))
            obj["status"] = current.get("status", {})
            self.objects[plural, namespace, name] = obj
            return copy.deepcopy(obj)

    def delete(self, plural: str, namespace: str, name: str, propagation: str) -> Obj:
        """Remove the object (and, unless ``Orphan``, what only it owns: ``_collect_garbage``).

        A running pod of a Job is not removed but killed: like the kubelet
        after SIGTERM it ends ``Failed`` with exit 143 and no
        ``DisruptionTarget`` condition, so ``reconcile`` counts it against
        its index, replaces it and only then lets it go (the Job's tracking
        finalizer).
        """
        with self._lock:
            obj = self.objects.get((plural, namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
            self.deletions.append((plural, name, propagation))
            if plural == "pods" and _job_owned(obj) and obj["status"].get("phase") in ("Pending", "Running"):
                obj["metadata"]["deletionTimestamp"] = self.stamp()
                self.finish_pod(name, 143, namespace=namespace)
                return copy.deepcopy(obj)
            del self.objects[plural, namespace, name]
            if propagation != "Orphan":
                self._collect_garbage(obj["metadata"]["uid"])
            return obj

    def _collect_garbage(self, gone: str) -> None:
        """The garbage collector after the object with uid ``gone`` was deleted: a dependent goes (and then
        its own dependents) once none of its owners exists any more; one with another owner left only loses
        the reference to the deleted one."""
        uids = {other["metadata"]["uid"] for other in self.objects.values()}
        for key, other in list(self.objects.items()):
            refs = other["metadata"].get("ownerReferences", [])
            if key not in self.objects or not any(ref.get("uid") == gone for ref in refs):
                continue
            left = [ref for ref in refs if ref.get("uid") in uids]
            if left:
                other["metadata"]["ownerReferences"] = left
                other["metadata"]["resourceVersion"] = str(next(self._versions))
            else:
                del self.objects[key]
                self._collect_garbage(other["metadata"]["uid"])

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
                conditions=[{"type": "Ready", "status": "True"}],
                containerStatuses=[{"name": container, "ready": True, "restartCount": 0,
                                    "state": {"running": {"startedAt": self.stamp()}}}],
            ))
            self.update("deployments", namespace, deployment, lambda d: d["status"].update(
                replicas=1, readyReplicas=1, availableReplicas=1, updatedReplicas=1,
            ))
            return name

    def start_pods(self, job_name: str, namespace: str = "default") -> list[str]:
        """Create a Running pod for every index of the Job that has no active or finished pod."""
        job = self.objects["jobs", namespace, job_name]
        created = []
        for index in range(job["spec"]["completions"]):
            if not self._runs(job, index):
                created.append(self._new_pod(job, index, failures=0))
        return created

    def finish_pod(self, pod: str, exit_code: int, reason: str = "", namespace: str = "default", disrupted: bool = False) -> None:
        """The container exited: phase Succeeded (0) or Failed, with a terminated state (kubelet)."""

        def change(obj: Obj) -> None:
            obj["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            obj["status"]["containerStatuses"] = [
                {
                    "name": "tensorflow",
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                            "finishedAt": self.stamp(),
                        }
                    },
                }
            ]
            if disrupted:
                obj["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]

        self.update("pods", namespace, pod, change)

    def reconcile(self, job_name: str, namespace: str = "default") -> None:
        """One pass of a model of the Job controller over an Indexed Job with ``restartPolicy: Never``.

        Per index, the newest pod decides: Succeeded -> index done; Failed ->
        ``podFailurePolicy`` rules in order (FailJob on exit codes; Ignore on
        a pod condition: replaced without counting), else counted: replaced
        while its failure count is below ``backoffLimitPerIndex``, otherwise
        the index fails and, with ``maxFailedIndexes: 0``, the Job fails.
        ``successPolicy`` ``succeededIndexes`` or all indexes done completes
        the Job; a finished Job's running pods are deleted.
        """
        with self._lock:
            job = self.objects["jobs", namespace, job_name]
            spec = job["spec"]
            if _finished(job):
                return
            done: set[int] = set()
            for index in range(spec["completions"]):
                runs = self._runs(job, index)
                if not runs:
                    continue
                latest = runs[-1]
                phase = latest["status"].get("phase")
                if phase == "Succeeded":
                    done.add(index)
                if phase != "Failed":
                    continue
                action = _failure_action(spec, latest)
                count = int(latest["metadata"]["annotations"][FAILURE_COUNT_KEY])
                if action == "FailJob":
                    return self._finish(job, "Failed", "PodFailurePolicy", f"pod {latest['metadata']['name']} matched a FailJob rule")
                if action != "Ignore" and count + 1 > spec.get("backoffLimitPerIndex", 0):
                    return self._finish(job, "Failed", "FailedIndexes", f"index {index} used its {spec.get('backoffLimitPerIndex', 0)} retries")
                self._new_pod(job, index, failures=count if action == "Ignore" else count + 1)
                if latest["metadata"].get("deletionTimestamp"):  # accounted: the tracking finalizer is released
                    del self.objects["pods", namespace, latest["metadata"]["name"]]
            rules = (spec.get("successPolicy") or {}).get("rules", [])
            wanted = [{int(i) for i in rule["succeededIndexes"].split(",")} for rule in rules]
            if any(w <= done for w in wanted) or len(done) == spec["completions"]:
                self._finish(job, "Complete", "", "")

    def _finish(self, job: Obj, condition: str, reason: str, message: str) -> None:
        status = job["status"]
        status.setdefault("conditions", []).append(
            {"type": condition, "status": "True", "reason": reason, "message": message, "lastTransitionTime": self.stamp()}
        )
        if condition == "Complete":
            status["completionTime"] = self.stamp()
        uid = job["metadata"]["uid"]
        for key, pod in list(self.objects.items()):
            owned = any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences", []))
            if key[0] == "pods" and owned and pod["status"].get("phase") in ("Pending", "Running"):
                del self.objects[key]

    def _runs(self, job: Obj, index: int) -> list[Obj]:
        uid = job["metadata"]["uid"]
        pods = [
            pod
            for (plural, _, _), pod in self.objects.items()
            if plural == "pods"
            and any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences", []))
            and pod["metadata"]["annotations"][INDEX_KEY] == str(index)
        ]
        return sorted(pods, key=lambda p: int(p["metadata"]["annotations"][FAILURE_COUNT_KEY]))

    def _new_pod(self, job: Obj, index: int, failures: int) -> str:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        name = f"{meta['name']}-{index}-{next(self._names):05d}"
        labels = {**template["metadata"].get("labels", {}), "job-name": meta["name"], INDEX_KEY: str(index)}
        annotations = {**template["metadata"].get("annotations", {}), INDEX_KEY: str(index), FAILURE_COUNT_KEY: str(failures)}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"], "controller": True}],
            },
            "spec": {**template["spec"], "hostname": f"{meta['name']}-{index}"},
        }
        self.create("pods", meta["namespace"], pod)
        self.update(
            "pods",
            meta["namespace"],
            name,
            lambda obj: obj["status"].update(
                phase="Running",
                startTime=self.stamp(),
                containerStatuses=[{"name": "tensorflow", "restartCount": 0, "state": {"running": {"startedAt": self.stamp()}}}],
            ),
        )
        return name


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> Obj:
        return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": self.reason, "message": self.message, "code": self.code}


def _matches(obj: Obj, selector: dict[str, str]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _job_owned(obj: Obj) -> bool:
    return any(ref.get("kind") == "Job" for ref in obj["metadata"].get("ownerReferences", []))


def _finished(job: Obj) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in job["status"].get("conditions", []))


def _failure_action(spec: Obj, pod: Obj) -> str:
    """The action of the first ``podFailurePolicy`` rule that matches the failed pod, else ``Count``.

    As the Job controller: ``onExitCodes`` looks at the named container (every
    container without ``containerName``) and matches if one of them
    terminated with a code ``In`` (or ``NotIn``) ``values``; ``onPodConditions``
    matches a pod condition of that type and status (default ``True``).
    ``Ignore`` replaces the pod without counting it against
    ``backoffLimitPerIndex`` (``reconcile``).
    """
    statuses = pod["status"].get("containerStatuses", [])
    conditions = {(c["type"], c.get("status")) for c in pod["status"].get("conditions", [])}
    for rule in (spec.get("podFailurePolicy") or {}).get("rules", []):
        on_codes = rule.get("onExitCodes")
        if on_codes is not None:
            named = on_codes.get("containerName")
            codes = [
                s["state"]["terminated"]["exitCode"]
                for s in statuses
                if (named is None or s["name"] == named) and "terminated" in s["state"]
            ]
            inside = [(code in on_codes["values"]) == (on_codes["operator"] == "In") for code in codes if code != 0]
            if any(inside):
                return str(rule["action"])
        for pattern in rule.get("onPodConditions", []):
            if (pattern["type"], pattern.get("status", "True")) in conditions:
                return str(rule["action"])
    return "Count"


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
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        if len(rest) < 3 or rest[0] != "namespaces" or rest[2] not in KINDS:
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
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        store = self.store
        try:
            body = self._body()  # always consumed, so a refused request leaves the connection usable
            namespace, plural, name, sub, query = self._route()
            store.requests.append((method, self.path))
            for fault in list(store._faults):
                if fault[:2] == (method, plural):
                    store._faults.remove(fault)
                    raise ApiError(fault[2], "Forbidden" if fault[2] == 403 else "InternalError", "injected fault")
            if method == "GET" and sub == "log":
                return self._log(namespace, name, query)
            if method == "GET" and sub == "portforward":
                return self._portforward(namespace, name, query)
            if method == "GET" and name is None:
                selector = dict(part.split("=", 1) for part in query.get("labelSelector", [""])[0].split(",") if part)
                items = store.list(plural, namespace, {k.rstrip("="): v for k, v in selector.items()})
                return self._send(200, {"kind": KINDS[plural] + "List", "apiVersion": "v1", "metadata": {}, "items": items})
            if method == "GET":
                obj = store.get(plural, name, namespace)
                if obj is None:
                    raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
                return self._send(200, obj)
            if method == "POST":
                return self._send(201, store.create(plural, namespace, body))
            if method == "PUT":
                return self._send(200, store.replace(plural, namespace, name, body))
            if method == "DELETE":
                propagation = query.get("propagationPolicy", [body.get("propagationPolicy", "Background")])[0]
                return self._send(200, store.delete(plural, namespace, name, propagation))
            raise ApiError(405, "MethodNotAllowed", method)
        except ApiError as exc:
            self._send(exc.code, exc.body())

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
            text = store.pod_logs.get((namespace, name), "")
            if tail is not None and not follow:
                text = "".join(text.splitlines(keepends=True)[-tail:])
            if len(text) > sent:
                self._chunk(text[sent:].encode())
                sent = len(text)
            pod = store.get("pods", name, namespace)
            if not follow or pod is None or pod["status"].get("phase") not in ("Pending", "Running"):
                break
            time.sleep(0.02)
        self.wfile.write(b"0\r\n\r\n")

    def _portforward(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        """``pods/<name>/portforward``: upgrade to a websocket, then relay the data channel (one port)."""
        if self.store.get("pods", name, namespace) is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise ApiError(400, "BadRequest", "Upgrade request required")
        protocols = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if PORT_FORWARD_PROTOCOL not in protocols:
            raise ApiError(400, "BadRequest", f"unsupported subprotocols {protocols}")
        port = int(query["ports"][0])
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", PORT_FORWARD_PROTOCOL)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
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
            _send_frame(client, b"\x01" + f"error forwarding port {port} to pod {name}: connection refused".encode())
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

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")
