"""Safety property, on every backend: ``render -d DIR`` writes what it renders (``plan.json`` and the env of the
spec, API keys included, on Slurm; the compose file; the manifests) readable by the user only, whatever the umask:
``DIR`` made ``0700`` when ``render`` creates it (an existing one keeps its mode), every file ``0600``, none written
through a link. On Slurm ``DIR`` is on the shared filesystem every user of the cluster reads. A backend that renders
nothing (local) refuses, writing nothing."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli.commands import main
from launcher.plan.targets import BackendKind

SECRET = "sk-" + "render-0123456789abcdef"
RENDERS = {BackendKind.COMPOSE, BackendKind.K8S, BackendKind.SLURM}


@pytest.fixture(autouse=True)
def _open_umask() -> Iterator[None]:
    """The usual umask (022): files and directories readable by everyone unless tfcluster says otherwise."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def spec_file(root: Path, kind: BackendKind) -> Path:
    data: dict[str, object] = {"name": "private", "env": {"API_KEY": SECRET},
                               "roles": {"worker": {"replicas": 2, "command": ["python", "train.py"]}}}
    if kind is BackendKind.K8S:
        data["kubernetes"] = {"registry": "127.0.0.1:5000"}
    (root / "spec.yaml").write_text(yaml.safe_dump(data))
    return root / "spec.yaml"


def modes(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): stat.S_IMODE(p.lstat().st_mode) for p in directory.rglob("*")}


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda kind: kind.value)
def test_render_writes_private_files_into_a_private_directory(kind: BackendKind, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, kind)
    out = tmp_path / "out" / "rendered"
    result = CliRunner().invoke(main, ["render", str(spec), "-b", kind.value, "-d", str(out)])
    if kind not in RENDERS:
        assert result.exit_code == 2 and not out.exists(), result.output
        return
    assert result.exit_code == 0, result.output
    written = modes(out)
    assert written and set(written.values()) == {0o600}, written
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755  # made on the way: not tfcluster's
    assert any(SECRET in (out / name).read_text() for name in written)  # what makes them private matters


@pytest.mark.parametrize("kind", sorted(RENDERS, key=str), ids=lambda kind: kind.value)
def test_render_into_an_existing_directory_keeps_its_mode_and_replaces_a_link(kind: BackendKind, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, kind)
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    first = CliRunner().invoke(main, ["render", str(spec), "-b", kind.value, "-d", str(out)])
    assert first.exit_code == 0, first.output
    name = sorted(modes(out))[0]
    (out / name).unlink()
    (tmp_path / "theirs").write_text("theirs")
    (out / name).symlink_to(tmp_path / "theirs")
    again = CliRunner().invoke(main, ["render", str(spec), "-b", kind.value, "-d", str(out)])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "theirs").read_text() == "theirs" and not (out / name).is_symlink()
    assert set(modes(out).values()) == {0o600} and stat.S_IMODE(out.stat().st_mode) == 0o755
