"""The controller's files are private: 0700 directories, 0600 files, also where an older version left them open;
every directory from TFCLUSTER_HOME down is the user's own, else refused, and no file is reached through a link."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.paths import REPO
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir
from launcher.supervision.statefile import UnsafeStatePath, open_private, private_dir, read_json, write_json, write_private

#: Another user's uid (the tests run as root in CI: ``os.chown`` makes a directory someone else's).
OTHER_UID = 4242
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("existing", [0o755, 0o750, 0o700], ids=oct)
def test_private_dir_tightens_every_level_below_an_existing_home_and_never_the_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: int) -> None:
    """An existing ``$TFCLUSTER_HOME`` of the user's own, that no one else can write to, keeps its mode."""
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


def _group_writable_home(home: Path) -> Path:
    home.mkdir()
    home.chmod(0o775)
    return home


def _shared_tmp_home(home: Path) -> Path:
    home.mkdir()
    home.chmod(0o1777)  # as /tmp
    return home


def _linked_backend_dir(home: Path) -> Path:
    home.mkdir(mode=0o700)
    (home.parent / "elsewhere").mkdir(mode=0o700)
    (home / "local").symlink_to(home.parent / "elsewhere")
    return home / "local"


def _another_users_backend_dir(home: Path) -> Path:
    home.mkdir(mode=0o700)
    (home / "local").mkdir(mode=0o700)
    os.chown(home / "local", OTHER_UID, OTHER_UID)
    return home / "local"


def _another_users_home(home: Path) -> Path:
    home.mkdir(mode=0o755)
    os.chown(home, OTHER_UID, OTHER_UID)
    return home


def _another_users_link_as_home(home: Path) -> Path:
    (home.parent / "mine").mkdir(mode=0o700)
    home.symlink_to(home.parent / "mine")
    os.lchown(home, OTHER_UID, OTHER_UID)
    return home


def _a_file_as_run_dir(home: Path) -> Path:
    (home / "local").mkdir(mode=0o700, parents=True)
    (home / "local" / "demo").write_text("")
    return home / "local" / "demo"


UNSAFE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "group-writable home": (_group_writable_home, "is writable by its group or others (mode 0775)"),
    "/tmp-like home": (_shared_tmp_home, "is writable by its group or others (mode 1777)"),
    "symbolic link below the home": (_linked_backend_dir, "is a symbolic link"),
    "another user's directory": (_another_users_backend_dir, f"is a directory of uid {OTHER_UID}, not yours"),
    "another user's home": (_another_users_home, f"is a directory of uid {OTHER_UID}, not yours"),
    "another user's link as the home": (_another_users_link_as_home, f"is a symbolic link of uid {OTHER_UID}, not yours"),
    "a file as the run's directory": (_a_file_as_run_dir, "is not a directory"),
}
NEEDS_ROOT = {"another user's directory", "another user's home", "another user's link as the home"}


def unsafe_cases() -> list[object]:
    return [pytest.param(name, marks=[AS_ROOT] if name in NEEDS_ROOT else [], id=name) for name in UNSAFE]


@pytest.mark.parametrize("case", unsafe_cases())
def test_a_state_path_another_user_could_take_over_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """A shared ``$TFCLUSTER_HOME`` (``/tmp``): another user's directory or link in the state path would hand
    them the run's plan (whose commands a supervisor runs) and state; it is refused, whether tfcluster reads
    there (``status``) or writes (``up``)."""
    make, why = UNSAFE[case]
    home = tmp_path / "home"
    bad = make(home)
    monkeypatch.setenv("TFCLUSTER_HOME", str(home))
    with pytest.raises(UnsafeStatePath, match=f"^{re.escape(f'{bad} {why}')}"):
        private_dir(naming.state_dir("local", "demo"))
    with pytest.raises(UnsafeStatePath, match=f"^{re.escape(f'{bad} {why}')}"):
        StateDir.of(BackendKind.LOCAL, "demo")
    assert not (tmp_path / "elsewhere").exists() or not any((tmp_path / "elsewhere").iterdir())


def test_a_home_that_is_the_users_own_link_to_a_private_directory_is_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/.tfcluster`` linked to a directory of one's own on another disk."""
    (tmp_path / "disk").mkdir(mode=0o700)
    (tmp_path / "home").symlink_to(tmp_path / "disk")
    monkeypatch.setenv("TFCLUSTER_HOME", str(tmp_path / "home"))
    private_dir(naming.state_dir("local", "demo"))
    assert (tmp_path / "disk" / "local" / "demo").is_dir()


def test_up_refuses_an_unsafe_home_in_one_line_exit_2_before_starting_anything(tmp_path: Path) -> None:
    home = _linked_backend_dir(tmp_path / "home")
    (tmp_path / "spec.yaml").write_text("name: demo\nroles:\n  worker: {replicas: 1, command: [python, -c, pass]}\n")
    result = subprocess.run([sys.executable, "-m", "launcher", "up", "spec.yaml", "-b", "local", "-d"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TFCLUSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)})
    assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1), result
    assert result.stderr.startswith(f"error: {home} is a symbolic link: another user could take over"), result.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_no_file_is_written_or_read_through_a_link(tmp_path: Path) -> None:
    """Inside tfcluster's own directories a link is none of tfcluster's files: replaced when written, refused when
    appended to, none when read."""
    target = tmp_path / "target"
    target.write_text("theirs")
    (tmp_path / ".plan.json.tmp").symlink_to(target)  # where write_private writes before the rename
    write_json(tmp_path / "plan.json", {"env": {}})
    (tmp_path / "task.log").symlink_to(target)
    with pytest.raises(OSError):
        open_private(tmp_path / "task.log")
    (tmp_path / "status.json").symlink_to(tmp_path / "plan.json")
    assert read_json(tmp_path / "status.json") is None
    assert target.read_text() == "theirs" and read_json(tmp_path / "plan.json") == {"env": {}}
