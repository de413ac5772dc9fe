"""Fixtures of the tests on a real Kubernetes cluster (the cluster itself: ``helpers.k8s_start``'s ``_e2e_cluster``).

Contract: ``launch`` submits a plan and, after the test, takes down with its volumes exactly the runs it submitted
(named with ``helpers.k8s_e2e.run_name``: this session's own), never a run it did not make; ``taken_down`` does the
same (``tfcluster down --volumes``) for the names a test appends of runs it started with the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.k8s_e2e import cli, kubeconfig, namespace
from launcher.backends.kubernetes.backend import KubernetesBackend, KubernetesOptions
from launcher.plan.planner import Plan


@pytest.fixture
def core() -> object:
    """The cluster's core API as the launcher's user (to read and delete pods as a user with kubectl would)."""
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig()))


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[KubernetesBackend]:
    monkeypatch.setenv("KUBECONFIG", kubeconfig())
    yield KubernetesBackend.create(KubernetesOptions(namespace=namespace()))


@pytest.fixture
def launch(backend: KubernetesBackend) -> Iterator[Callable[[Plan], None]]:
    """Submit a plan; the runs submitted (and only they) are taken down with their volumes after the test."""
    names: list[str] = []

    def submit(plan: Plan) -> None:
        names.append(plan.name)
        backend.submit(KubernetesBackend.dry_run(plan))

    yield submit
    for name in names:
        backend.cancel(name, volumes=True)


@pytest.fixture
def taken_down(tmp_path: Path) -> Iterator[list[str]]:
    """Names of runs the test starts with the CLI: `down --volumes` after it, whatever it did."""
    names: list[str] = []
    yield names
    for name in names:
        cli("down", name, "--volumes", cwd=tmp_path)
