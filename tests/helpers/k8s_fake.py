"""The fake Kubernetes API server (``fakes.kubernetes_api``) as a fixture, a backend talking to it, and the
launcher Role's permissions (k8s/rbac-launcher.yaml) against the requests the fake received, and
task events written to the log of a task's current pod (``pod_of``, ``write``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from fakes.kubernetes_api import CLUSTER_SCOPED, JOB_NAME_KEY, POD_GROUP_DISCOVERY, FakeKubernetes, Permission, permission
from helpers.paths import REPO
from helpers.polling import wait_for_condition
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.kubeapi import KubeApi, Obj
from launcher.backends.kubernetes.watched import RunObjects, Snapshot
from launcher.protocol.events import MANUAL_TOKEN, Event, format_event


@pytest.fixture(name="fake")
def fake_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKubernetes]:
    """A running fake API server (import ``fake_fixture``; tests take it as ``fake``). Every ``RunObjects`` made
    while it runs (a runtime's watches) is closed with it: a watch left running would retry against the stopped
    server for the rest of the session, threads that load the machine and allocate inside other tests' measures."""
    server = FakeKubernetes()
    server.url = server.start()
    opened: list[RunObjects] = []
    made = RunObjects.__init__

    def recorded(self: RunObjects, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(RunObjects, "__init__", recorded)
    yield server
    for objects in opened:
        objects.close()
    server.stop()


def backend_for(fake: FakeKubernetes, namespace: str | None = None, **options: Any) -> KubernetesBackend:
    api_client = client.ApiClient(client.Configuration(host=fake.url))
    return KubernetesBackend(api_client, namespace, **options)


def kubeconfig_for(fake: FakeKubernetes, path: Path) -> Path:
    """A kubeconfig at ``path`` whose current context is the fake API server (``KUBECONFIG`` for the CLI)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
        "users": [{"name": "dev", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "dev"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


#: The longest (real time) a settled read waits for the runtime's watches to catch up with the fake.
SETTLE_SECONDS = 60.0


class SettledObjects(RunObjects):
    """``RunObjects`` whose every read first waits until both its watches applied every change the fake made so far
    (the fake sends a bookmark at its latest version: ``bookmark``). The watches are threads, the fake's clock
    stands still in real time: a test that changed the fake and polls then reads what it changed, as with the
    synchronous LIST of before, while the watch path is the product's own."""

    def __init__(self, fake: FakeKubernetes, api: KubeApi, namespace: str, cluster: str, clock: Callable[[], float]):
        self.fake = fake
        super().__init__(api, namespace, cluster, clock)

    def settle(self) -> None:
        version = self.fake.bookmark()
        ends = time.monotonic() + SETTLE_SECONDS
        while not all(w.stale_since is None and int(w.version or 0) >= version for w in self.kinds.values()):
            assert time.monotonic() < ends, f"the watches never caught up with version {version}: " + ", ".join(
                f"{w.kind} at {w.version or '-'} ({w.error or 'current'})" for w in self.kinds.values())
            time.sleep(0.001)

    def snapshot(self) -> Snapshot | None:
        self.settle()
        return super().snapshot()

    def last(self) -> Snapshot:
        self.settle()
        return super().last()

    def pod(self, name: str) -> Obj | None:
        self.settle()
        return super().pod(name)


def settled(fake: FakeKubernetes) -> Callable[[KubeApi, str, str, Callable[[], float]], RunObjects]:
    """``KubernetesRuntime``'s ``objects`` for a test over ``fake``: ``SettledObjects``."""
    return lambda api, namespace, cluster, clock: SettledObjects(fake, api, namespace, cluster, clock)


def caught_up(fake: FakeKubernetes, objects: RunObjects) -> None:
    """Until ``objects``' watches applied every change the fake made so far (a bookmark at its latest version)."""
    version = fake.bookmark()
    wait_for_condition(lambda: all(w.stale_since is None and int(w.version or 0) >= version
                                   for w in objects.kinds.values()))


def rbac_allowed() -> set[Permission]:
    """What the launcher's Role (k8s/rbac-launcher.yaml) allows."""
    role = next(d for d in yaml.safe_load_all((REPO / "k8s" / "rbac-launcher.yaml").read_text()) if d["kind"] == "Role")
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def rbac_used(fake: FakeKubernetes) -> set[Permission]:
    """What the requests the fake received needed, but the cluster-scoped reads a namespace's Role cannot grant
    (``up``'s look at the namespace's admission, ``admission_policy.unguarded``, which a 403 leaves silent) and API
    discovery, which every user may read (the ``system:discovery`` ClusterRole)."""
    resources = [(method, path) for method, path in fake.requests if path.split("?")[0].rstrip("/") != POD_GROUP_DISCOVERY]
    return {p for p in (permission(method, path) for method, path in resources) if p[1] not in CLUSTER_SCOPED}


def pod_of(fake: FakeKubernetes, task: str, namespace: str = "default") -> str:
    """The current pod of ``task``: the newest pod of its Job (the Job named after the task)."""
    pods = fake.list("pods", namespace, {JOB_NAME_KEY: task})
    return max(pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))["metadata"]["name"]


def fail_running_pods(fake: FakeKubernetes, job: str, rounds: int, namespace: str = "default") -> None:
    """``rounds`` times, each running pod of Job ``job`` fails (exit 1): with the fake's ``job_controller`` the Job
    replaces each, until its ``backoffLimit`` is spent."""
    for _ in range(rounds):
        for pod in [p for p in fake.list("pods", namespace, {JOB_NAME_KEY: job}) if p["status"]["phase"] == "Running"]:
            fake.finish_pod(pod["metadata"]["name"], 1, namespace=namespace)


def write(fake: FakeKubernetes, task: str, *events: Event, token: str = MANUAL_TOKEN) -> None:
    """Append ``events`` (``token``'s event lines) to the log of ``task``'s current pod."""
    key = ("default", pod_of(fake, task))
    fake.pod_logs[key] = fake.pod_logs.get(key, "") + "".join(format_event(e, task, token) + "\n" for e in events)
