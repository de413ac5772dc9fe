"""The typed Kubernetes client (``launcher.backends.kubernetes.kubeapi``) against the fake API: each ``Kind``'s
requests reach that kind's resource, what an API error means has one home, and no other module of the backend
calls the ``kubernetes`` client itself."""

from __future__ import annotations

import ast
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fakes.kubernetes_api import KINDS, SERVED_UNDER, FakeKubernetes
from helpers import sources
from helpers.k8s_fake import backend_for
from helpers.paths import REPO
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, context_namespace
from launcher.errors import LaunchError
from launcher.plan import naming

PACKAGE = REPO / "launcher" / "backends" / "kubernetes"
@pytest.mark.parametrize("kind", list(Kind))
def test_each_kinds_requests_reach_its_own_resource(fake: FakeKubernetes, kind: Kind) -> None:
    api = backend_for(fake).api
    body: dict[str, Any] = {"apiVersion": "v1", "kind": str(kind), "metadata": {"name": "x"}}
    if kind is Kind.DEPLOYMENT:
        body["spec"] = {"selector": {}, "template": {}}  # the client checks a Deployment's body has them
    if kind is Kind.POD_GROUP:
        body["spec"] = {"schedulingPolicy": {"gang": {"minCount": 1}}}  # ... a PodGroup's
    if kind is Kind.ROLE_BINDING:
        body["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}  # ... a binding's
    requests: list[Callable[[], Any]] = [
        lambda: api.create(kind, "default", body), lambda: api.read(kind, "x", "default"),
        lambda: api.replace(kind, "x", "default", body), lambda: api.delete(kind, "x", "default"),
        lambda: api.select(kind, "default", "a=b"),
    ]
    for request in requests:
        try:
            request()
        except ApiException:
            pass  # a refused body or a missing object: the request was made
    [resource] = [plural for plural, named in KINDS.items() if named == kind]
    where = f"/{SERVED_UNDER[resource]}/namespaces/default/{resource}"  # where the API server serves it
    assert [(method, path.split("?")[0]) for method, path in fake.requests] == [
        ("POST", where), ("GET", f"{where}/x"), ("PUT", f"{where}/x"), ("DELETE", f"{where}/x"), ("GET", where)]


def test_404_409_and_403_have_one_meaning_each(fake: FakeKubernetes) -> None:
    api = backend_for(fake).api
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}
    assert api.read_if_exists(Kind.CONFIG_MAP, "cm", "default") is None  # 404: none
    assert api.create_unless_exists(Kind.CONFIG_MAP, "default", config_map) is not None
    assert api.create_unless_exists(Kind.CONFIG_MAP, "default", config_map) is None  # 409: it exists
    assert api.read_if_exists(Kind.CONFIG_MAP, "cm", "default")["data"] == {"a": "1"}  # type: ignore[index]
    with api.unless_gone("delete Pod gone"):  # 404: nothing to do
        api.delete(Kind.POD, "gone", "default")
    fake.fail_next("DELETE", "pods", 403)
    with pytest.raises(LaunchError, match=r"^cannot delete Pod p: 403 Forbidden: injected fault$"), api.unless_gone("delete Pod p"):
        api.delete(Kind.POD, "p", "default")
    fake.fail_next("GET", "configmaps", 403)
    with pytest.raises(LaunchError, match=r"^cannot read ConfigMap cm: 403 Forbidden"), api.errors("read ConfigMap cm"):
        api.read_if_exists(Kind.CONFIG_MAP, "cm", "default")  # only a 404 is "none"
    fake.fail_next("POST", "configmaps", 403)
    with pytest.raises(LaunchError, match=r"^cannot create ConfigMap cm: 403 Forbidden"), api.errors("create ConfigMap cm"):
        api.create_unless_exists(Kind.CONFIG_MAP, "default", config_map)  # only a 409 is "exists"


def test_an_unreachable_api_server_is_one_line_naming_it() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        host = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening: refused
        api = KubeApi(client.ApiClient(client.Configuration(host=host)))
        with pytest.raises(LaunchError, match=rf"^cannot list Jobs: Kubernetes API at {host} unreachable \("), \
                api.errors("list Jobs"):
            api.select(Kind.JOB, "default", "a=b")


def test_streams_go_through_a_client_of_their_own_so_no_other_request_goes_out_as_a_stream() -> None:
    """Opening an exec or a port-forward swaps its client's request function until the stream is open: on the client
    every thread's requests share (the supervisor's watches), a LIST sent meanwhile went out as a websocket and failed."""
    shared = client.ApiClient(client.Configuration(host="http://127.0.0.1:1"))
    api = KubeApi(shared)
    streams = api._pods().api_client
    assert streams is not shared and streams.configuration is shared.configuration
    assert api._pods().api_client is streams  # one for every stream


def test_only_the_typed_client_calls_the_kubernetes_client() -> None:
    """No module of the backend but ``kubeapi`` imports ``kubernetes`` or names a request by a built string."""
    for module in sorted(PACKAGE.glob("*.py")):
        tree = sources.parse(module.read_text(), str(module))
        for node in ast.walk(tree):
            if module.name != "kubeapi.py":
                imported = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not [n for n in imported if n.split(".")[0] in ("kubernetes", "websocket")], \
                    f"{module.name}:{node.lineno} imports the kubernetes client: go through kubeapi.KubeApi"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                assert len(node.args) > 1 and isinstance(node.args[1], ast.Constant), \
                    f"{module.name}:{node.lineno} names an attribute by a built string: call a typed method"


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts:
  - {name: team-a, context: {cluster: c, user: u, namespace: team-a}}
  - {name: plain, context: {cluster: c, user: u}}
current-context: team-a
"""


def test_a_run_this_machine_did_not_launch_is_looked_for_in_the_kubeconfig_contexts_namespace(
        fake: FakeKubernetes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As kubectl: with no namespace given or recorded (``status``, ``logs``, ``down`` of a run launched elsewhere),
    the current (or given) context's namespace, else ``default``; a launch still goes to the spec's namespace."""
    (tmp_path / "config").write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert context_namespace(None) == "team-a"
    assert context_namespace("plain") is None and context_namespace("nonexistent") is None
    assert KubernetesBackend.create(KubernetesOptions()).context_namespace == "team-a"
    assert KubernetesBackend.create(KubernetesOptions(namespace="ns", context="plain")).context_namespace is None
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # in a pod: its own namespace is always given
    assert context_namespace(None) is None

    fake.create("configmaps", "team-a", {"metadata": {"name": "elsewhere-tfconfig", "labels": naming.labels("elsewhere", "r")},
                                         "data": {}})
    assert backend_for(fake, context_namespace="team-a").describe("elsewhere") is not None
    assert backend_for(fake).describe("elsewhere") is None  # in default
    assert backend_for(fake, "ns", context_namespace="team-a").describe("elsewhere") is None  # given: that one
