"""``down --volumes``'s one removal guard, for every backend: a checkpoint store is deleted only if tfcluster
created it for that cluster.

Contract: ``prepare`` makes a missing checkpoint dir and marks it (``MARKER``: the cluster and run);
a dir that existed is left as it is. ``guard(plan)`` (``removal_problem``) refuses, as a ``SpecError``,
a dir that is or holds ``/``, home, the workdir or the current directory, or lacks this cluster's
marker; else it gives the dir ``remove`` may delete (None for an object store). Engine objects
(volumes, claims) count as ours only with tfcluster's labels (``created_for``); no other is deleted.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan
from launcher.protocol.paths import is_object_store
from launcher.spec.problems import Problem, SpecError

#: The file in a checkpoint dir that says tfcluster created it, for which cluster and run.
MARKER = ".tfcluster-created"
FIELD = "checkpoint.dir"


def prepare(directory: Path, cluster: str, run_id: str) -> None:
    """Create ``directory`` and mark it as ``cluster``'s, unless it exists (then it is left as it is)."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        if not directory.is_dir():
            raise LaunchError(f"checkpoint dir {str(directory)!r} exists and is not a directory") from None
        return
    except OSError as exc:
        raise LaunchError(f"cannot create the checkpoint dir {str(directory)!r}: {exc.strerror}") from None
    (directory / MARKER).write_text(json.dumps({"cluster": cluster, "run_id": run_id}))


def prepare_for(plan: Plan) -> None:
    """``prepare`` the plan's checkpoint dir for its cluster and run; nothing for an object store."""
    directory = _directory(plan)
    if directory is not None:
        prepare(directory, plan.name, plan.run_id)


def guard(plan: Plan) -> Path | None:
    """The dir ``down --volumes`` of ``plan``'s cluster may delete (None: an object store), or ``SpecError``
    with the problem ``removal_problem`` finds. Call it before stopping anything: a refusal does nothing."""
    directory = _directory(plan)
    if directory is None:
        return None
    problem = removal_problem(directory, plan.name, Path(plan.workdir or "."))
    if problem is not None:
        raise SpecError([problem])
    return directory


def _directory(plan: Plan) -> Path | None:
    configured = plan.run_config.checkpoint_dir
    return None if is_object_store(configured) else Path(configured)


def _protected(workdir: Path) -> dict[Path, str]:
    """The directories a removal may neither hit nor contain, resolved, with what they are."""
    places = {Path("/"): "the root directory", Path.home(): "the home directory",
              Path.cwd(): "the current directory", workdir: "the directory the cluster was started from"}
    return {place.resolve(): what for place, what in places.items()}


def _marked_for(directory: Path, cluster: str) -> bool:
    marker = directory / MARKER
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        return bool(json.loads(marker.read_text()).get("cluster") == cluster)
    except (OSError, ValueError, AttributeError):
        return False


def removal_problem(directory: Path, cluster: str, workdir: Path) -> Problem | None:
    """Why ``down --volumes`` must not delete ``directory``, or None if it may (see the module contract)."""
    resolved = directory.resolve()
    keep = f"`tfcluster down {cluster}` without --volumes stops the cluster and keeps it"
    for place, what in _protected(workdir).items():
        if place == resolved or place.is_relative_to(resolved):
            relation = "is" if place == resolved else "contains"
            return Problem(FIELD, f"{str(resolved)!r} {relation} {what}: `down --volumes` deletes only a "
                                  f"checkpoint dir tfcluster created; {keep}")
    if resolved.exists() and not _marked_for(resolved, cluster):
        return Problem(FIELD, f"{str(resolved)!r} was not created by tfcluster for cluster {cluster!r} "
                              f"(it has no {MARKER} naming it): delete it yourself if you mean to; {keep}")
    return None


def remove(directory: Path) -> None:
    """Delete ``directory`` (checked by ``removal_problem``); nothing if it is gone."""
    resolved = directory.resolve()
    try:
        shutil.rmtree(resolved)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise LaunchError(f"cannot delete the checkpoint dir {str(resolved)!r}: {exc.strerror}") from None


def created_for(labels: Mapping[str, str] | None, cluster: str) -> bool:
    """True if an engine object's ``labels`` say tfcluster created it for ``cluster`` (see the module contract)."""
    found = labels or {}
    return found.get(naming.LABEL_MANAGED) == naming.MANAGER and found.get(naming.LABEL_CLUSTER) == cluster
