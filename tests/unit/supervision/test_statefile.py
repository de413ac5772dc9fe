"""The controller's files are private: 0700 directories, 0600 files, also where an older version left them open."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.plan import naming
from launcher.supervision.statefile import open_private, private_dir, read_json, write_json, write_private


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_private_dir_makes_and_tightens_every_level_from_the_home_down(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    monkeypatch.setenv("TFCLUSTER_HOME", str(home))
    made = private_dir(naming.state_dir("local", "demo"))
    assert [mode(p) for p in (home, home / "local", made)] == [0o700] * 3
    tmp_path.chmod(0o755)
    private_dir(made)
    assert mode(tmp_path) == 0o755  # above the home: untouched


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
