"""The Python API under the CLI: load a spec, plan it, dry-run it for a backend.

Contract: everything the CLI does is a call here or on a backend, so
notebooks and other tools get the same behaviour. ``load_spec(path,
backend)`` reports every problem of the spec, the planner's and that
backend's at once, located by file and line; ``plan`` reads only the
spec and, when it names a ``workspace``, that directory's files (their digest);
``dry_run`` adds the backend's rendered files and is exactly what
``Backend.submit`` applies. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack

from launcher.backends import backend_class, get_backend
from launcher.backends.workspace import MAX_WORKSPACE_BYTES, scan, script_problem
from launcher.plan.checks import plan_problems
from launcher.plan.dryrun import DryRun, plan_document, tasks_document
from launcher.plan.planner import Plan, make_plan
from launcher.plan.script import SOURCE, ScriptRun, script_problems, script_spec_data
from launcher.plan.targets import BackendKind
from launcher.protocol.events import MANUAL_TOKEN, new_token
from launcher.spec import loader, tfjob
from launcher.spec.models import ClusterSpec
from launcher.spec.problems import Problem, SpecCheck, SpecError

__all__ = [
    "load_spec", "parse_spec", "validate_data", "convert_tfjob", "script_spec", "ScriptRun", "plan", "dry_run", "tasks_document", "plan_document",
    "new_run_id", "get_backend", "BackendKind",
]


def checks(backend: BackendKind | str | None = None, capacity: bool = False) -> list[SpecCheck]:
    """The rules above the spec's own: the planner's, ``backend``'s when one is named, and with
    ``capacity`` whether this machine can take the cluster (``Backend.capacity``, what ``up`` checks)."""
    found: list[SpecCheck] = [plan_problems]
    if backend is not None:
        found.append(backend_class(BackendKind(backend)).validate)
        if capacity:
            found.append(backend_class(BackendKind(backend)).capacity)
    return found


def load_spec(
    path: str | Path, backend: BackendKind | str | None = None, overrides: Mapping[str, Any] | None = None, capacity: bool = False
) -> ClusterSpec:
    """Read and validate the spec (or Kubeflow TFJob) file at ``path`` (for ``backend`` too, when given;
    ``capacity``: see ``checks``), ``overrides`` merged in.

    A TFJob's Kubernetes-only pod fields are accepted without a backend and for ``k8s`` only.
    """
    kubernetes = backend is None or BackendKind(backend) is BackendKind.K8S
    return loader.load_spec(path, checks(backend, capacity), overrides, kubernetes=kubernetes)


def parse_spec(text: str, source: str | None = None, backend: BackendKind | str | None = None) -> ClusterSpec:
    return loader.parse_spec(text, source, checks(backend))


def validate_data(data: object, backend: BackendKind | str | None = None, source: str | None = None) -> ClusterSpec:
    """Validate an already-parsed mapping (e.g. built in a notebook); ``source`` names it in messages."""
    return loader.validate_data(data, source=source, checks=checks(backend))


def convert_tfjob(path: str | Path) -> str:
    """``tfcluster convert``: the tfcluster spec YAML equivalent to the TFJob at ``path``, with a comment per
    field it does not carry (``launcher.spec.tfjob``)."""
    return tfjob.to_yaml(loader.load_tfjob(path), str(path))


def script_spec(run: ScriptRun, spec_file: str | Path | None = None, workdir: Path | None = None) -> ClusterSpec:
    """The validated spec ``tfcluster run`` launches (``launcher.plan.script``).

    ``run.program`` is a module, or a script path relative to the workspace
    (``workdir``, default the current directory, unless ``spec_file``, which
    gives the roles, resources and policies, names another), where the tasks
    start: it must be a file there and, on container backends, one that
    ships in the workspace layer, or an absolute path in ``run.image``
    (``script_problem``). The script runs with the interpreter the backend's
    ``Target`` names (``Target.python``): this one locally, ``slurm.python``
    or this one on Slurm, the image's ``python`` in containers.
    """
    workdir = workdir or Path.cwd()
    problems = script_problems(run, from_spec=spec_file is not None)
    if problems:
        raise SpecError(problems, SOURCE)
    base = load_spec(spec_file, run.backend).model_dump(mode="json", exclude_unset=True) if spec_file is not None else None
    spec = validate_data(script_spec_data(run, base), run.backend, SOURCE)
    target = backend_class(run.backend).target(spec)
    if run.python != target.python:  # the interpreter follows the spec (e.g. ``slurm.python`` of a -f spec)
        run = run.model_copy(update={"python": target.python})
        spec = validate_data(script_spec_data(run, base), run.backend, SOURCE)
    if not run.module and spec.workspace is not None:
        problem = script_problem((workdir / spec.workspace).resolve(), run.program,
                                 shipped=target.runs_in_containers, own_image=run.image is not None)
        if problem is not None:
            raise SpecError([Problem("SCRIPT", problem)], SOURCE)
    return spec


def new_run_id() -> str:
    """A fresh id for one launch (time-ordered, unique)."""
    return f"{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


class PlanOptions(TypedDict, total=False):
    """``plan``'s keyword options (see its docstring), which ``dry_run`` passes on."""

    launching: bool
    overrides: Mapping[str, Any] | None
    capacity: bool
    force: bool


def plan(
    spec: ClusterSpec | str | Path,
    backend: BackendKind | str = BackendKind.LOCAL,
    run_id: str = "manual",
    *,
    launching: bool = False,
    overrides: Mapping[str, Any] | None = None,
    capacity: bool = False,
    force: bool = False,
) -> Plan:
    """The plan for ``spec`` on ``backend``: pure, no files rendered.

    A path is loaded and validated for ``backend`` (with ``capacity``, also
    whether this machine can take it; a ``ClusterSpec`` is then checked
    too); a ``ClusterSpec`` must already be valid. ``launching`` picks free
    local ports and draws the run's event token (``launcher.protocol.events``); previews
    use sequential ones and the fixed ``MANUAL_TOKEN`` so dry-run output is reproducible.
    A workspace that ships is refused over ``MAX_WORKSPACE_BYTES`` unless ``force``.
    """
    kind = BackendKind(backend)
    if not isinstance(spec, ClusterSpec):
        spec = load_spec(spec, kind, overrides, capacity)
    elif capacity and (problems := backend_class(kind).capacity(spec)):
        raise SpecError(problems)
    target = backend_class(kind).target(spec, launching=launching)
    source = scan(spec.workspace, contents=target.runs_in_containers, max_bytes=None if force else MAX_WORKSPACE_BYTES) \
        if spec.workspace else None
    return make_plan(spec, target, run_id, source, new_token() if launching else MANUAL_TOKEN)


def dry_run(
    spec: ClusterSpec | str | Path,
    backend: BackendKind | str = BackendKind.LOCAL,
    run_id: str = "manual",
    **options: Unpack[PlanOptions],
) -> DryRun:
    """The plan (``plan``, with the same ``options``) and the backend's rendered files: what ``dry-run`` shows and
    ``submit`` applies."""
    planned = plan(spec, backend, run_id, **options)
    return backend_class(planned.backend).dry_run(planned)
