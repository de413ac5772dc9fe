"""Backend options are one small model per backend, validated before anything connects."""

from __future__ import annotations

import pytest

from launcher.backends import backend_class, get_backend
from launcher.backends.interface import BackendOptions
from launcher.errors import LaunchError
from launcher.plan.targets import BackendKind


def test_an_option_a_backend_does_not_have_is_one_line_before_connecting() -> None:
    with pytest.raises(LaunchError) as raised:
        get_backend(BackendKind.LOCAL, {"namespace": "team"})
    assert str(raised.value) == "local backend options: namespace: Extra inputs are not permitted"


def test_a_wrong_type_is_refused_too() -> None:
    with pytest.raises(LaunchError, match="k8s backend options: context: Input should be a valid string"):
        get_backend(BackendKind.K8S, {"context": 3})


def test_each_backend_declares_its_options() -> None:
    options = {kind: backend_class(kind).Options for kind in BackendKind}
    assert options[BackendKind.LOCAL] is options[BackendKind.COMPOSE] is BackendOptions
    assert set(options[BackendKind.K8S].model_fields) == {"namespace", "context"}


def test_the_python_api_names_a_backend_and_its_options_as_the_readme_shows() -> None:
    with pytest.raises(LaunchError, match="k8s backend options: namespaces: Extra inputs are not permitted"):
        get_backend("k8s", {"namespaces": "ml"})
