"""The fake Kubernetes API server (``fakes.kubernetes_api``) as a fixture, and a backend talking to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from fakes.kubernetes_api import FakeKubernetes
from launcher.backends.kubernetes.backend import KubernetesBackend


@pytest.fixture(name="fake")
def fake_fixture() -> Iterator[FakeKubernetes]:
    """A running fake API server (import ``fake_fixture``; tests take it as ``fake``)."""
    server = FakeKubernetes()
    server.url = server.start()
    yield server
    server.stop()


def backend_for(fake: FakeKubernetes, namespace: str | None = None, **options: float) -> KubernetesBackend:
    api_client = client.ApiClient(client.Configuration(host=fake.url))
    return KubernetesBackend(api_client, namespace, clock=lambda: fake.now, **options)
