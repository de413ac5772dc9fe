"""The controller's own files on this machine: private, tfcluster's own, and JSON ones shared between processes.

Contract: what tfcluster keeps here (a plan, whose env may carry
credentials and whose commands a supervisor runs, the rendered compose file,
logs that may echo that env) is readable by its owner only and can be
neither read nor replaced by another user. Every directory from
``naming.home()`` down to one tfcluster uses is tfcluster's own:
``owned_dir`` checks those that exist, ``private_dir`` makes the missing
ones ``0700`` and checks all. A directory passes when it is a directory
(not a symbolic link; the home itself may be a link of the user's own to a
directory that passes), owned by the user, and writable by no group or other
user (``/tmp`` as the home, or a group's project directory, is refused: use
a directory of your own, ``/tmp/tfcluster-$USER``); anything else raises
``UnsafeStatePath`` naming the path and why (the CLI's one line, exit 2),
before anything is started. Below the home ``private_dir`` tightens each
directory to ``0700`` (an older version left them open); the home keeps its
mode. Files: ``write_private`` replaces a file atomically with a ``0600``
one, created anew (``O_EXCL|O_NOFOLLOW``); ``open_private`` opens a ``0600``
file for appending (tightening an existing one), never through a link;
``write_json`` is ``write_private`` of JSON, so a reader in another process
never sees half a file; ``read_private`` reads a file, never through a link,
and ``read_json`` returns None for a file that is missing or not (yet) valid
JSON. Paths outside the home: ``private_dir`` makes the directory itself
``0700`` and checks nothing above it; ``user_dir`` (``render -d DIR``, the
user's) makes it ``0700`` only when it creates it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from launcher.errors import TfclusterError
from launcher.plan import naming

DIR_MODE = 0o700
FILE_MODE = 0o600


class UnsafeStatePath(TfclusterError):
    """A directory tfcluster would keep its state in could be taken over by another user; ``str()`` names it."""


def owned_dir(path: Path) -> Path:
    """``path``, once every existing directory from ``naming.home()`` down to it is tfcluster's own (the module
    contract), else ``UnsafeStatePath``; a path outside the home is not checked. Returns ``path``."""
    for directory in _own_levels(path.absolute()):
        _check(directory)
    return path


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter, created if missing; returns ``path``.

    Under ``naming.home()``, every directory from the home down to ``path`` is made if missing and checked
    (``owned_dir``), and every one below the home gets the same mode; the home only if this call creates it.
    """
    path = path.absolute()
    levels = _own_levels(path)
    if not levels:  # outside the home (a supervisor pod's scratch space): only itself
        _make(path, parents=True)
        os.chmod(path, DIR_MODE)
        return path
    for directory in levels:
        created = _make(directory, parents=directory == levels[0])
        _check(directory)
        if created or directory != levels[0]:
            os.chmod(directory, DIR_MODE)  # mkdir's mode passes through the umask; an older version's, tightened
    return path


def user_dir(path: Path) -> Path:
    """``path``, a directory of the user's that tfcluster writes files into (``render -d``): made ``0700`` if
    missing (what lies above it as ``mkdir -p`` makes it); an existing one keeps its mode. Returns ``path``."""
    if _make(path, parents=True):
        os.chmod(path, DIR_MODE)
    return path


def _make(directory: Path, parents: bool) -> bool:
    """Whether ``directory`` was made now (``0700``; ``parents``: with what lies above it)."""
    try:
        directory.mkdir(mode=DIR_MODE, parents=parents)
    except FileExistsError:
        return False
    return True


def _own_levels(path: Path) -> list[Path]:
    """The directories from the home down to the absolute ``path``, the home first; none outside the home."""
    home = naming.home().absolute()
    if path != home and home not in path.parents:
        return []
    below = path.relative_to(home).parts
    return [home.joinpath(*below[:depth]) for depth in range(len(below) + 1)]


def _check(directory: Path) -> None:
    """``UnsafeStatePath`` unless the existing ``directory`` is tfcluster's own (a missing one passes)."""
    try:
        info = os.lstat(directory)
        if stat.S_ISLNK(info.st_mode) and directory == naming.home().absolute():
            _refuse_unless_mine(directory, info, "a symbolic link")
            info = os.stat(directory)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeStatePath(f"{directory} is a symbolic link: {_ADVICE}")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeStatePath(f"{directory} is not a directory: {_ADVICE}")
    _refuse_unless_mine(directory, info, "a directory")
    if info.st_mode & 0o022:
        raise UnsafeStatePath(f"{directory} is writable by its group or others (mode {info.st_mode & 0o7777:04o}): "
                              f"{_ADVICE}")


def _refuse_unless_mine(directory: Path, info: os.stat_result, what: str) -> None:
    if info.st_uid != os.geteuid():
        raise UnsafeStatePath(f"{directory} is {what} of uid {info.st_uid}, not yours (uid {os.geteuid()}): {_ADVICE}")


_ADVICE = ("another user could take over the runs' state and plans kept there; point TFCLUSTER_HOME at a "
           "directory of your own (e.g. /tmp/tfcluster-$USER, made if missing)")


def write_private(path: Path, content: str | bytes) -> None:
    """Replace ``path`` atomically with ``content`` (str: UTF-8), readable by its owner only: written to a new
    file (a partial one a crash left is removed first), never through a link."""
    partial = path.with_name(f".{path.name}.tmp")
    data = content.encode() if isinstance(content, str) else content
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(handle.fileno(), FILE_MODE)  # the umask may have taken from the mode
        handle.write(data)
    os.replace(partial, path)


def open_private(path: Path) -> BinaryIO:
    """``path`` opened for appending bytes, readable by its owner only (an existing file is tightened), never
    through a link (``OSError``)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    os.fchmod(descriptor, FILE_MODE)
    return os.fdopen(descriptor, "ab")


def read_private(path: Path) -> str:
    """The text of ``path`` (UTF-8), never through a link (``OSError``, as for a missing file)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read().decode()


def write_json(path: Path, data: Any) -> None:
    write_private(path, json.dumps(data))


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(read_private(path))
    except (OSError, ValueError):
        return None
