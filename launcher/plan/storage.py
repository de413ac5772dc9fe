"""Where a run keeps its files: the one rule every backend's ``validate`` applies to the spec's paths.

Contract: ``storage_problems(spec, target)`` checks the local ``checkpoint.dir`` and
``tensorboard.dir`` against ``target.storage(spec)``: at most one problem per field, naming the first
rule the lexically normalised path breaks (one line; absolute in containers; not ``/``; in the
target's volume; clear of the target's mounts and devices; not node-local). ``clash(path, storage,
mounts)`` is the mount and ownership rule alone, for other mounts a spec asks for. Object-store URLs
pass. The rules as a user meets them: docs/security.md.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from launcher.plan.logdir import log_dir
from launcher.plan.targets import Storage, Target
from launcher.protocol.paths import is_object_store
from launcher.spec.models import ClusterSpec
from launcher.spec.paths import is_within, normalized
from launcher.spec.problems import Problem

#: Characters no path may hold: they end a line (of a script, a manifest, a message) or the path itself.
LINE_BREAKS = ("\n", "\r", "\x00")


def overlaps(path: str, other: str) -> bool:
    """True if either path is the other or lies in it (a mount point over or under another), normalised."""
    return is_within(path, other) or is_within(other, path)


def storage_problems(spec: ClusterSpec, target: Target) -> list[Problem]:
    """The problems of ``spec``'s checkpoint and log dirs on ``target`` (see the module contract)."""
    storage = target.storage(spec)
    problems = []
    configured = spec.checkpoint.dir
    checkpoint_dir = target.checkpoint_dir(spec)
    if configured is not None and not is_object_store(configured):
        if storage.volume is not None and not is_within(configured, storage.volume):
            problems.append(Problem("checkpoint.dir", f"on {target.kind.value} must be {storage.volume} or a path "
                                    "below it (the checkpoint volume, writable by the non-root tasks), or a gs:// or "
                                    f"s3:// URL; got {configured!r}"))
        else:
            problems += _problems("checkpoint.dir", configured, configured, storage)
    summaries = spec.tensorboard.dir
    written = log_dir(spec, checkpoint_dir)
    if summaries is None or written is None or is_object_store(written):
        return problems
    volume = storage.volume or checkpoint_dir
    if storage.in_containers and not is_within(written, volume):
        problems.append(Problem("tensorboard.dir", f"must lie in the checkpoint volume at {volume} (or be relative to "
                                                   f"it, or a gs:// or s3:// URL); got {summaries!r}"))
    elif not storage.in_containers:
        problems += _problems("tensorboard.dir", summaries, written, storage)
    return problems


def clash(path: str, storage: Storage, mounts: Mapping[str, str] | None = None) -> str | None:
    """How a directory or mount at ``path`` meets the target's own mounts (and ``mounts``) or a directory that
    is not the run's (``overlaps /tmp, the tasks' scratch space``), or None."""
    for mount, what in {**storage.mounts, **(mounts or {})}.items():
        if overlaps(path, mount):
            return f"overlaps {mount}, {what}"
    for owned, what in storage.owned.items():
        if is_within(owned, path):
            return f"is or holds {owned}, {what}"
    return None


def _problems(field: str, given: str, path: str, storage: Storage) -> list[Problem]:
    """The first rule ``path`` (the field's value ``given``, resolved on the target) breaks, as a problem."""
    if any(c in given for c in LINE_BREAKS):
        return [Problem(field, "must be one line (no line break or NUL)")]
    if storage.in_containers and not posixpath.isabs(path):
        return [Problem(field, f"must be an absolute path in the container, or a gs:// or s3:// URL; got {given!r}")]
    resolved = normalized(posixpath.join(storage.base, path) if storage.base is not None else path)
    shown = repr(given) if given == resolved else f"{given!r} ({resolved})"
    if resolved == "/":
        return [Problem(field, f"{shown} is /, the whole filesystem: name a directory of its own")]
    met = clash(resolved, storage)
    if met:
        return [Problem(field, f"{shown} {met}: name a directory of its own")]
    local = next((d for d in storage.node_local if is_within(resolved, d)), None)
    if local and posixpath.isabs(given):
        return [Problem(field, f"{shown} is local to each node (in {local}): every task must reach the same "
                               "directory on the shared filesystem (default: tfcluster-runs/<name> under the submit "
                               "directory)")]
    return []
