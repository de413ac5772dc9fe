"""The controller's files are private: 0700 directories, 0600 files, also where an older version left them open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.plan import naming
from launcher.supervision.statefile import open_private, private_dir, read_json, write_json, write_private


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("existing", [0o755, 0o1777, 0o750], ids=oct)
def test_private_dir_tightens_every_level_below_an_existing_home_and_never_the_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: int) -> None:
    """``$TFCLUSTER_HOME`` may name a shared directory (``/tmp``, a project dir on a cluster's filesystem)."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(existing)
    (home / "local").mkdir(mode=0o755)
    (home / "local").chmod(0o755)  # as an older version left it: tightened
    monkeypatch.setenv("TFCLUSTER_HOME", str(home))
    made = private_dir(naming.state_dir("local", "demo"))
    assert [mode(p) for p in (home / "local", made)] == [0o700] * 2
    assert home.stat().st_mode & 0o7777 == existing
    private_dir(home)
    assert home.stat().st_mode & 0o7777 == existing
    tmp_path.chmod(0o755)
    private_dir(made)
    assert mode(tmp_path) == 0o755  # above the home: untouched


def test_a_home_tfcluster_creates_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "new" / "home"
    monkeypatch.setenv("TFCLUSTER_HOME", str(home))
    previous = os.umask(0o022)
    try:
        made = private_dir(naming.state_dir("slurm", "demo"))
    finally:
        os.umask(previous)
    assert [mode(p) for p in (home, home / "slurm", made)] == [0o700] * 3
    assert mode(tmp_path / "new") == 0o755  # made on the way, not tfcluster's


def test_private_dir_outside_the_home_tightens_only_itself(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(mode=0o755)
    (tmp_path / "a").chmod(0o755)
    private_dir(tmp_path / "a" / "b")
    assert (mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (0o755, 0o700)


def test_files_are_written_0600_and_open_ones_tightened(tmp_path: Path) -> None:
    for name in ("plan.json", ".plan.json.tmp", "task.log"):
        (tmp_path / name).write_text("old")
        (tmp_path / name).chmod(0o644)
    write_json(tmp_path / "plan.json", {"env": {"TOKEN": "x"}})
    with open_private(tmp_path / "task.log") as log:
        assert log.tell() == 3  # appends
        log.write(b" new")
    write_private(tmp_path / "fresh", b"")
    assert read_json(tmp_path / "plan.json") == {"env": {"TOKEN": "x"}}
    assert (tmp_path / "task.log").read_text() == "old new"
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {"plan.json": 0o600, "task.log": 0o600, "fresh": 0o600}
