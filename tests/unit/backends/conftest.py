"""Fixtures of the backend tests: the fake Kubernetes API server, started per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.kubernetes_api import FakeKubernetes


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    """A running ``FakeKubernetes``; its base URL is ``fake.url``."""
    server = FakeKubernetes()
    server.url = server.start()
    yield server
    server.stop()
