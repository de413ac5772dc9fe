"""``kubernetes_options``: the one check of the Kubernetes-only options (``--namespace``, ``--context``,
``--registry``) every launching command calls, and the ``--registry`` it lets reach the plan."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from launcher.cli.commands import REGISTRY_OPTION, kubernetes_options


@click.command()
@click.option("--backend", "-b", default="local")
@click.option("--namespace")
@REGISTRY_OPTION
def probe(backend: str, namespace: str | None, registry: str | None) -> None:
    click.echo(f"registry={kubernetes_options(backend, registry, namespace=namespace)}")


@pytest.mark.parametrize(("args", "env", "output"), [
    (["-b", "k8s", "--registry", "r:5000"], {}, "registry=r:5000"),
    (["-b", "k8s"], {"TFCLUSTER_REGISTRY": "e:5000"}, "registry=e:5000"),
    (["-b", "local"], {"TFCLUSTER_REGISTRY": "e:5000"}, "registry=None"),  # exported for k8s: not refused, not used
    (["-b", "compose"], {}, "registry=None"),
])
def test_the_registry_that_reaches_the_plan(args: list[str], env: dict[str, str], output: str) -> None:
    result = CliRunner().invoke(probe, args, env={"TFCLUSTER_REGISTRY": None, **env})
    assert (result.exit_code, result.output.strip()) == (0, output), result.output


@pytest.mark.parametrize(("args", "named"), [
    (["-b", "local", "--registry", "r:5000"], "--registry"),
    (["-b", "compose", "--namespace", "ml", "--registry", "r:5000"], "--namespace, --registry"),
])
def test_a_kubernetes_option_with_another_backend_is_refused(args: list[str], named: str) -> None:
    result = CliRunner().invoke(probe, args, env={"TFCLUSTER_REGISTRY": None})
    assert result.exit_code == 2 and f"{named}: only with -b k8s (the backend is {args[1]})" in result.output
