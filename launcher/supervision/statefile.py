"""The controller's own files on this machine: private, and JSON ones shared between processes.

Contract: what tfcluster keeps here (a plan, whose env may carry
credentials, the rendered compose file, logs that may echo that env) is
readable by its owner only: ``private_dir`` makes a directory ``0700``
(and every directory below ``naming.home()`` down to it, when it lies
there: tfcluster's own), tightening one an older version left open; the
home itself is made ``0700`` only when tfcluster creates it: an existing
one (``$TFCLUSTER_HOME`` may name a shared directory) keeps its mode, and
what tfcluster keeps there is in its private subdirectories; ``write_private``
replaces a file atomically with a ``0600`` one; ``open_private``
opens a ``0600`` file for appending (tightening an existing one).
``write_json`` is ``write_private`` of JSON, so a reader in another
process never sees half a file; ``read_json`` returns None for a file
that is missing or not (yet) valid JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from launcher.plan import naming

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter, created if missing; returns ``path``.

    Under ``naming.home()``, every directory below the home down to ``path`` gets the same mode; the home
    only if this call creates it (an existing home is never changed).
    """
    home = naming.home().absolute()
    path = path.absolute()
    chain = [path, *path.parents]
    if home in chain:
        _make_home(home)
        levels = chain[:chain.index(home)]
    else:
        levels = [path]
    for directory in reversed(levels):
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(directory, DIR_MODE)
    return path


def _make_home(home: Path) -> None:
    """Create ``home`` private if it is missing; an existing one (the user's, maybe shared) keeps its mode."""
    try:
        home.mkdir(mode=DIR_MODE, parents=True)
    except FileExistsError:
        return
    os.chmod(home, DIR_MODE)  # mkdir's mode passes through the umask


def write_private(path: Path, content: str | bytes) -> None:
    """Replace ``path`` atomically with ``content`` (str: UTF-8), readable by its owner only."""
    partial = path.with_name(f".{path.name}.tmp")
    data = content.encode() if isinstance(content, str) else content
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(handle.fileno(), FILE_MODE)  # a partial file an older version left keeps its mode on open
        handle.write(data)
    os.replace(partial, path)


def open_private(path: Path) -> BinaryIO:
    """``path`` opened for appending bytes, readable by its owner only (an existing file is tightened)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    os.fchmod(descriptor, FILE_MODE)
    return os.fdopen(descriptor, "ab")


def write_json(path: Path, data: Any) -> None:
    write_private(path, json.dumps(data))


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
