"""The real-cluster tests' namespace has one home (helpers.k8s_e2e.namespace): the variable, else the kubeconfig's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers.k8s_e2e import KUBECONFIG_ENV, NAMESPACE_ENV, namespace


def kubeconfig(tmp_path: Path, context: dict[str, str]) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", **context}}],
    }))
    return str(path)


def test_the_namespace_is_the_kubeconfig_contexts_unless_the_variable_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAMESPACE_ENV, raising=False)
    monkeypatch.setenv(KUBECONFIG_ENV, kubeconfig(tmp_path, {"namespace": "tfcluster-e2e"}))
    assert namespace() == "tfcluster-e2e"
    monkeypatch.setenv(NAMESPACE_ENV, "mine")
    assert namespace() == "mine"


def test_without_either_the_namespace_is_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAMESPACE_ENV, raising=False)
    monkeypatch.setenv(KUBECONFIG_ENV, kubeconfig(tmp_path, {}))
    assert namespace() == "default"
    monkeypatch.delenv(KUBECONFIG_ENV)
    assert namespace() == "default"
