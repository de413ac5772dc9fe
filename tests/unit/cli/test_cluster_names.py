"""A NAME on the command line becomes a path under the tfcluster home: only a cluster name is taken."""

from __future__ import annotations

import pytest

from launcher.backends.compose.backend import ComposeBackend
from launcher.backends.local.backend import LocalBackend
from launcher.cli.commands import main
from launcher.errors import LaunchError
from launcher.plan import naming


@pytest.mark.parametrize("args", [
    ["down", "../../proj", "-b", "compose"], ["down", "../../proj", "-b", "local", "--volumes"], ["down", ".."],
    ["status", "../../proj"], ["logs", "../../proj"], ["watch", "."], ["tensorboard", "ok", "../../proj"],
    ["down", "Proj"], ["down", "x" * 64],
])
def test_a_name_that_is_no_cluster_name_is_one_line_exit_2_and_touches_nothing(cli, args: list[str]) -> None:
    home = naming.home()
    (home / "compose").mkdir(parents=True)
    (home / "local").mkdir()
    project = home.parent / "proj"
    project.mkdir(exist_ok=True)
    (project / "plan.json").write_text("{}")
    result = cli.invoke(main, args)
    assert result.exit_code == 2, result.output
    assert len(result.output.splitlines()) == 1 and "is not a cluster name" in result.output
    assert (project / "plan.json").exists() and (home / "compose").is_dir() and (home / "local").is_dir()


def test_the_backends_refuse_such_a_name_too() -> None:
    for backend in (LocalBackend(), ComposeBackend(client=None)):
        with pytest.raises(LaunchError, match="is not a cluster name"):
            backend.cancel("../..", volumes=True)
