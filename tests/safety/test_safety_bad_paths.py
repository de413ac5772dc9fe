"""Safety property: bad paths and names exit 2 with one line per problem, on every backend, and nothing starts.

``tfcluster validate -b KIND`` (and ``up -b KIND``, which validates first) refuses a checkpoint or log dir that
is ``/`` however it is spelled (``//``, ``/x/..``), that meets a mount point the backend uses itself (Kubernetes'
``/tmp`` and ``/etc/tfcluster``), that lies outside the checkpoint volume on compose, or in a node-local
directory on Slurm; an env name or label key with a trailing newline; a Slurm port block past 65535. Each problem
is one line ``FILE:LINE: FIELD: message``, exit 2, no traceback, and ``up`` connects to no engine (every
backend's ``create`` fails the test) and leaves nothing in ``$TFCLUSTER_HOME``. A path that is fine for a
backend passes on it: the table below states, for every backend, which cases it refuses, so a backend added to
``BackendKind`` fails here until its row is written. The rules live in ``launcher.plan.storage`` (paths, over
each ``Target.storage``), ``launcher.spec.models`` (names, matched whole) and
``launcher.backends.slurm.placement`` (the port block). No engine is needed: each is checked before one is asked.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from launcher.backends import backend_class
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind

REFUSED, FINE = "refused", "fine"
BASE: dict[str, Any] = {"name": "paths", "roles": {"worker": {"replicas": 2}}}


@dataclass(frozen=True)
class Case:
    name: str
    spec: dict[str, Any]
    field: str
    verdicts: dict[str, str]

    def verdict(self, kind: BackendKind) -> str:
        if kind.value not in self.verdicts:
            pytest.fail(f"case {self.name!r} says nothing of the {kind.value} backend: add it to {__name__}.CASES")
        return self.verdicts[kind.value]


def case(name: str, spec: dict[str, Any], field: str, **verdicts: str) -> Case:
    return Case(name, spec, field, verdicts)


def checkpoint(directory: str) -> dict[str, Any]:
    return {"checkpoint": {"dir": directory}}


def summaries(directory: str) -> dict[str, Any]:
    return {"tensorboard": {"dir": directory}}


def k8s_mount(path: str) -> dict[str, Any]:
    return {"kubernetes": {"volumes": [{"name": "data", "emptyDir": {}}],
                           "volume_mounts": [{"name": "data", "mount_path": path}]}}


CKPT, TB, MOUNT = "checkpoint.dir", "tensorboard.dir", "kubernetes.volume_mounts.0.mount_path"
R, F = REFUSED, FINE
CASES = [
    # name                       spec                                   field           local compose k8s  slurm
    case("root", checkpoint("/"), CKPT,                                               local=R, compose=R, k8s=R, slurm=R),
    case("root as //", checkpoint("//"), CKPT,                                        local=R, compose=R, k8s=R, slurm=R),
    case("root as /x/..", checkpoint("/x/.."), CKPT,                                  local=R, compose=R, k8s=R, slurm=R),
    case("a line break", checkpoint("/checkpoints/a\nb"), CKPT,                       local=R, compose=R, k8s=R, slurm=R),
    case("the cluster file's mount", checkpoint("/etc/tfcluster"), CKPT,              local=F, compose=R, k8s=R, slurm=F),
    case("holding the cluster file", checkpoint("/checkpoints/../etc"), CKPT,         local=F, compose=R, k8s=R, slurm=F),
    case("scratch /tmp", checkpoint("/tmp/ck"), CKPT,                                 local=F, compose=R, k8s=R, slurm=R),
    case("scratch as /x/../tmp", checkpoint("/x/../tmp/ck"), CKPT,                    local=F, compose=R, k8s=R, slurm=R),
    case("scratch as //tmp", checkpoint("//tmp/ck"), CKPT,                            local=F, compose=R, k8s=R, slurm=R),
    case("node-local /dev/shm", checkpoint("/dev/shm/ck"), CKPT,                      local=F, compose=R, k8s=F, slurm=R),
    case("the devices", checkpoint("/dev"), CKPT,                                     local=F, compose=R, k8s=R, slurm=F),
    case("relative", checkpoint("runs/a"), CKPT,                                      local=F, compose=R, k8s=R, slurm=F),
    case("in the volume", checkpoint("/checkpoints/run"), CKPT,                       local=F, compose=F, k8s=F, slurm=F),
    case("an object store", checkpoint("gs://bucket/run"), CKPT,                      local=F, compose=F, k8s=F, slurm=F),
    case("summaries at /", summaries("//"), TB,                                       local=R, compose=R, k8s=R, slurm=R),
    case("summaries off the volume", summaries("/var/tb"), TB,                        local=F, compose=R, k8s=R, slurm=F),
    case("summaries node-local", summaries("/x/../tmp/tb"), TB,                       local=F, compose=R, k8s=R, slurm=R),
    case("summaries escaping the volume", summaries("../../x"), TB,                   local=F, compose=R, k8s=R, slurm=F),
    case("a mount over the cluster file", k8s_mount("/etc"), MOUNT,                   local=F, compose=F, k8s=R, slurm=F),
    case("a mount at scratch", k8s_mount("//tmp/x"), MOUNT,                           local=F, compose=F, k8s=R, slurm=F),
    case("an env name", {"env": {"TOKEN\n": "x"}}, 'env."TOKEN\\n"',                   local=R, compose=R, k8s=R, slurm=R),
    case("a role's env name", {"roles": {"worker": {"replicas": 2, "env": {"A\n": "1"}}}}, 'roles.worker.env."A\\n"',
         local=R, compose=R, k8s=R, slurm=R),
    case("a label key", {"kubernetes": {"labels": {"team\n": "ml"}}}, 'kubernetes.labels."team\\n"',
         local=R, compose=R, k8s=R, slurm=R),
    case("a pod label key", {"kubernetes": {"pod_labels": {"a.io/b\n": "c"}}}, 'kubernetes.pod_labels."a.io/b\\n"',
         local=R, compose=R, k8s=R, slurm=R),
    case("a port block past 65535", {"roles": {"worker": {"replicas": 1000, "port": 65000}}}, "roles.worker.port",
         local=F, compose=F, k8s=F, slurm=R),
    case("a port block ending at 65535", {"roles": {"worker": {"replicas": 536, "port": 65000}}}, "roles.worker.port",
         local=F, compose=F, k8s=F, slurm=F),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory tfcluster runs in (relative paths are taken from it); no backend may reach its engine."""
    monkeypatch.chdir(tmp_path)
    for kind in BackendKind:
        def started(cls: type, options: object, kind: BackendKind = kind) -> None:
            raise AssertionError(f"{kind.value}: a refused spec reached the engine")
        monkeypatch.setattr(backend_class(kind), "create", classmethod(started))
    return tmp_path


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, mapping by mapping."""
    both = dict(base)
    for key, value in extra.items():
        both[key] = merged(both[key], value) if isinstance(value, dict) and isinstance(both.get(key), dict) else value
    return both


def write(directory: Path, spec: dict[str, Any]) -> Path:
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(merged(BASE, spec), sort_keys=False))
    return path


def problem_lines(result: Any, path: Path) -> list[str]:
    """The lines of a refusal: exit 2, nothing on stdout, no traceback, each ``FILE:LINE: FIELD: message``."""
    assert result.exit_code == 2 and result.stdout == "", (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    for line in lines:
        assert re.fullmatch(rf"{re.escape(str(path))}:\d+: \S+: .+", line) and line.isprintable(), line
    return lines


def left_in_home() -> list[str]:
    home = Path(os.environ["TFCLUSTER_HOME"])
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
@pytest.mark.parametrize("bad", CASES, ids=lambda c: c.name)
def test_a_bad_path_or_name_is_one_line_exit_2_and_nothing_starts(kind: BackendKind, bad: Case, workdir: Path) -> None:
    spec = write(workdir, bad.spec)
    runner = CliRunner()
    result = runner.invoke(main, ["validate", "-b", kind.value, str(spec)])
    if bad.verdict(kind) == FINE:
        assert result.exit_code == 0 and result.stdout == f"{spec}: ok (paths)\n", result.output
        return
    [line] = problem_lines(result, spec)
    assert line.split(": ", 2)[1] == bad.field, line
    before = left_in_home()
    up = runner.invoke(main, ["up", "-b", kind.value, "-d", str(spec)])
    assert problem_lines(up, spec) == [line]
    assert left_in_home() == before and sorted(p.name for p in workdir.iterdir()) == ["spec.yaml"]


#: Cases whose problems are independent of each other, checked together: names are checked with the fields (a spec
#: with a bad field is not checked further), paths and ports by the rules over a field-valid spec.
TOGETHER = {
    "names": ("an env name", "a role's env name", "a label key", "a pod label key"),
    "paths and ports": ("scratch /tmp", "summaries at /", "a mount over the cluster file", "a port block past 65535"),
}


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
@pytest.mark.parametrize("group", list(TOGETHER))
def test_every_problem_of_a_spec_is_its_own_line(kind: BackendKind, group: str, workdir: Path) -> None:
    together = [c for c in CASES if c.name in TOGETHER[group]]
    spec: dict[str, Any] = {}
    for bad in together:
        spec = merged(spec, bad.spec)
    path = write(workdir, spec)
    lines = problem_lines(CliRunner().invoke(main, ["validate", "-b", kind.value, str(path)]), path)
    assert sorted(line.split(": ", 2)[1] for line in lines) == sorted(c.field for c in together if c.verdict(kind) == REFUSED)
