"""Posix paths compared as the filesystem resolves them: the one home of that rule.

Contract: ``normalized(path)`` is ``path`` with ``.``, ``..``, repeated and
trailing slashes resolved lexically (``/x/../tmp`` is ``/tmp``, ``//a/`` is
``/a``), as a container runtime or the kernel reads it; ``is_within(path,
root)`` is true when the normalized ``path`` is the normalized ``root`` or
below it (``/checkpoints/../etc`` is not within ``/checkpoints``). Every
comparison of a checkpoint dir, a TensorBoard dir or a mount path goes
through them; links are not followed (these paths name places inside
containers and pods, not on this machine).
"""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath


def normalized(path: str) -> str:
    """``path`` resolved lexically (see the module contract); a relative path stays relative."""
    resolved = posixpath.normpath(path)
    return "/" + resolved.lstrip("/") if resolved.startswith("/") else resolved


def is_within(path: str, root: str) -> bool:
    """True if the posix ``path`` is ``root`` or below it, both normalized (a mount point and what it holds)."""
    base, inner = PurePosixPath(normalized(root)), PurePosixPath(normalized(path))
    return base == inner or base in inner.parents
