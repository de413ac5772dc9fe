"""``tfcluster run``: the cluster spec for the user's own script, built from command-line options.

Contract: both functions are pure. ``script_problems(run, from_spec)`` returns one problem per bad
option, named as typed, before anything is read or started. ``script_spec_data(run, base)`` returns
the spec mapping for the loader to validate: the program becomes the cluster-level ``command``;
roles come from the options, or from ``base`` (``-f``: a spec or a TFJob, whose programs the script
replaces); the current directory is the ``workspace`` unless ``-f`` names one. Users' guide: docs/spec.md
(Bring your own script).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.spec.models import DNS_LABEL, PY_MODULE, Strategy
from launcher.spec.problems import Problem

SOURCE = "tfcluster run"
DEFAULT_WORKERS = 2
MAX_REPLICAS = 10000


class ScriptRun(BaseModel):
    """What ``tfcluster run`` was asked; ``None`` counts were not given on the command line."""

    model_config = ConfigDict(frozen=True)

    program: str
    module: bool = False
    args: tuple[str, ...] = ()
    python: str = "python"
    backend: BackendKind = BackendKind.LOCAL
    workers: int | None = None
    chief: bool = False
    ps: int | None = None
    evaluator: bool = False
    name: str | None = None
    image: str | None = None
    registry: str | None = None
    env: tuple[str, ...] = ()

    def command(self) -> list[str]:
        return [self.python, *(["-m"] if self.module else []), self.program, *self.args]


def script_spec_data(run: ScriptRun, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec mapping of ``run`` (module contract); ``base`` is a spec's ``model_dump(mode="json", exclude_unset=True)``: what it states."""
    data: dict[str, Any] = dict(base) if base is not None else {"roles": _roles(run)}
    if base is not None:  # the script is the program of every role the spec's program ran on
        data["roles"] = {role: _without(spec, "command", "replaces_entrypoint", "args") for role, spec in base["roles"].items()}
    if base is None and run.ps:
        data["strategy"] = Strategy.PARAMETER_SERVER.value
    data["name"] = run.name or (base or {}).get("name") or naming.name_for_program(run.program)
    data["command"] = run.command()
    data["env"] = {**data.get("env", {}), **dict(item.split("=", 1) for item in run.env)}
    if run.image:  # the command line wins over the file: every task runs it
        data["image"] = run.image
        data["roles"] = {role: _without(spec, "image") for role, spec in data["roles"].items()}
    data["workspace"] = data.get("workspace") or "."
    if run.registry:
        data["kubernetes"] = {**data.get("kubernetes", {}), "registry": run.registry}
    return data


def _without(role: dict[str, Any] | None, *fields: str) -> dict[str, Any] | None:
    return None if role is None else {k: v for k, v in role.items() if k not in fields}


def _roles(run: ScriptRun) -> dict[str, dict[str, int]]:
    roles: dict[str, dict[str, int]] = {"worker": {"replicas": DEFAULT_WORKERS if run.workers is None else run.workers}}
    if run.chief or run.ps:
        roles["chief"] = {"replicas": 1}
    if run.ps:
        roles["ps"] = {"replicas": run.ps}
    if run.evaluator:
        roles["evaluator"] = {"replicas": 1}
    return roles


def script_problems(run: ScriptRun, from_spec: bool) -> list[Problem]:
    """What is wrong with the options of ``run`` (``from_spec``: ``-f`` was given)."""
    problems = []
    if run.module and not re.fullmatch(PY_MODULE, run.program):
        problems.append(Problem("-m", f"{run.program!r} is not a dotted module name, e.g. mypackage.train"))
    if not run.module and not run.program.endswith(".py"):
        problems.append(Problem("SCRIPT", f"{run.program!r} is not a .py file (or use -m package.module)"))
    for option, count, least in (("--workers", run.workers, 0), ("--ps", run.ps, 1)):
        if count is not None and not least <= count <= MAX_REPLICAS:
            problems.append(Problem(option, f"is {count}; must be between {least} and {MAX_REPLICAS}"))
    if run.name is not None and not (re.fullmatch(DNS_LABEL, run.name) and len(run.name) <= naming.MAX_DNS_LABEL):
        problems.append(Problem("--name", f"{run.name!r} must be a DNS-1123 label: lowercase letters, digits "
                                          "and '-', starting with a letter, at most 63 chars"))
    for item in run.env:
        if "=" not in item or not item.split("=", 1)[0]:
            problems.append(Problem("--env", f"{item!r} is not KEY=VALUE"))
    if from_spec and (run.workers is not None or run.chief or run.ps is not None or run.evaluator):
        problems.append(Problem("--workers/--chief/--ps/--evaluator", "roles come from the spec given with -f; "
                                                                      "set them there"))
    return problems
