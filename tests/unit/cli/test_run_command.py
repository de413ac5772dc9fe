"""``tfcluster run``: the spec it builds (the pure function) and its bad input (one line, exit 2, nothing started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher import api
from launcher.backends.local.state import LocalState
from launcher.plan import naming
from launcher.plan.script import ScriptRun, script_spec_data
from launcher.spec.models import RoleType, Strategy

CLI = [sys.executable, "-m", "launcher"]


def _replicas(spec) -> dict[str, int]:
    return {role.value: spec.roles.replicas(role) for role in RoleType if spec.roles.replicas(role)}


def test_options_become_roles_strategy_and_the_cluster_command() -> None:
    run = ScriptRun(program="train.py", args=("--epochs", "3", "-v"), python="py", ps=2, evaluator=True,
                    env=("A=b=c",))
    spec = api.validate_data(script_spec_data(run))
    assert spec.name == "train" and spec.strategy is Strategy.PARAMETER_SERVER
    assert _replicas(spec) == {"chief": 1, "worker": 2, "ps": 2, "evaluator": 1}
    assert spec.command == ["py", "train.py", "--epochs", "3", "-v"] and spec.env == {"A": "b=c"}
    module = api.validate_data(script_spec_data(ScriptRun(program="pkg.train", module=True, python="py")))
    assert module.command == ["py", "-m", "pkg.train"] and _replicas(module) == {"worker": 2}


@pytest.mark.parametrize(("program", "name"), [("train.py", "train"), ("sub/Train_MNIST v2.py", "train-mnist-v2"),
                                               ("pkg.mod_x", "mod-x"), ("2stage.py", "run-2stage"),
                                               ("x" * 80 + ".py", "x" * naming.MAX_DERIVED_NAME)])
def test_the_default_name_is_a_dns_label_from_the_program(program: str, name: str) -> None:
    assert naming.name_for_program(program) == name


def test_a_spec_given_with_f_keeps_its_roles_and_name(write_spec) -> None:
    base = api.load_spec(write_spec({"name": "big", "roles": {"chief": {}, "worker": {"replicas": 4}}}))
    spec = api.validate_data(script_spec_data(ScriptRun(program="t.py", python="py"), base.model_dump(mode="json")))
    assert spec.name == "big" and _replicas(spec) == {"chief": 1, "worker": 4}
    assert spec.command == ["py", "t.py"]


def test_image_is_every_tasks_base_image_even_where_the_spec_names_role_images(write_spec) -> None:
    base = api.load_spec(write_spec({"name": "own", "roles": {"chief": {"image": "a:1"}, "worker": {"image": "b:1"}}}))
    run = ScriptRun(program="t.py", python="py", image="mine:2")
    spec = api.validate_data(script_spec_data(run, base.model_dump(mode="json")))
    assert spec.image == "mine:2" and {spec.roles.role(r).image for r in (RoleType.CHIEF, RoleType.WORKER)} == {None}


@pytest.mark.parametrize(("backend", "slurm", "python"), [
    ("slurm", {"python": "/shared/venv/bin/python"}, "/shared/venv/bin/python"),  # -f spec's interpreter wins
    ("slurm", {}, sys.executable),  # default: the interpreter running tfcluster (a shared venv)
    ("local", {}, sys.executable),
    ("compose", {}, "python"),  # the image's
])
def test_the_script_runs_with_the_interpreter_of_the_backends_tasks(write_spec, tmp_path: Path, backend: str,
                                                                    slurm: dict[str, str], python: str) -> None:
    (tmp_path / "t.py").write_text("")
    base = write_spec({"name": "own", "roles": {"worker": {"replicas": 2}}, "slurm": slurm, "workspace": str(tmp_path)})
    spec = api.script_spec(ScriptRun(program="t.py", backend=backend), base, workdir=tmp_path)
    planned = api.plan(spec, backend)
    assert spec.command == [python, "t.py"] and {t.command[0] for t in planned.tasks} == {python}


def test_everything_after_the_script_reaches_it_unchanged(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import sys; print(sys.argv[1:])\n")
    result = subprocess.run([*CLI, "run", "--workers", "1", "t.py", "--workers", "9", "-d", "--", "x"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    plan = LocalState.named("t").record.read_plan()
    assert [t.command[1:] for t in plan.tasks] == [["t.py", "--workers", "9", "-d", "--", "x"]]
    assert plan.workdir == str(tmp_path.resolve())
    logs = subprocess.run([*CLI, "logs", "t"], capture_output=True, text=True, timeout=60).stdout
    assert "['--workers', '9', '-d', '--', 'x']" in logs
    subprocess.run([*CLI, "down", "t"], capture_output=True, timeout=60, check=True)


@pytest.mark.parametrize(("args", "message"), [
    ([], "tfcluster run: SCRIPT: missing"),
    (["missing.py"], "tfcluster run: SCRIPT: missing.py: no such file"),
    (["notes.txt"], "tfcluster run: SCRIPT: 'notes.txt' is not a .py file"),
    (["--workers", "-1", "t.py"], "tfcluster run: --workers: is -1"),
    (["--workers", "many", "t.py"], "tfcluster run: Invalid value for '--workers'"),
    (["--ps", "0", "t.py"], "tfcluster run: --ps: is 0"),
    (["--name", "Not_A_Label", "t.py"], "tfcluster run: --name: 'Not_A_Label' must be a DNS-1123 label"),
    (["--env", "NOVALUE", "t.py"], "tfcluster run: --env: 'NOVALUE' is not KEY=VALUE"),
    (["--env", "TF_CONFIG={}", "t.py"], "tfcluster run: env.TF_CONFIG: is set by tfcluster"),
    (["-b", "k8s", "t.py"], "tfcluster run: kubernetes.registry: a workspace image must be pushed where the nodes pull from"),
    (["-f", "spec.yaml", "--workers", "3", "t.py"], "tfcluster run: --workers/--chief/--ps/--evaluator: roles come"),
    (["-m", "not a module"], "tfcluster run: -m: 'not a module' is not a dotted module name"),
    (["--namespace", "ml", "t.py"], "tfcluster run: --namespace: only with -b k8s (the backend is local)"),
    (["-b", "compose", "--context", "c", "--registry", "r:5000", "t.py"],
     "tfcluster run: --context, --registry: only with -b k8s (the backend is compose)"),
    (["--workers", "0", "t.py"], "tfcluster run: roles: "),
])
def test_bad_input_is_one_line_exit_2_and_starts_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "t.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    result = subprocess.run([*CLI, "run", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert not LocalState.named(naming.name_for_program(args[-1] if args else "t.py")).exists()


@pytest.mark.parametrize(("args", "message"), [
    (["-b", "compose", "../t.py"], "../t.py: outside the workspace"),
    (["-b", "compose", "--image", "mine:1", "../t.py"], "../t.py: outside the workspace"),  # the layer is still built
    (["-b", "compose", "--image", "mine:1", "missing.py"], "missing.py: no such file in the workspace"),
    (["-b", "compose", "{ws}/t.py"], "{ws}/t.py: a path on this machine; the tasks have the workspace at /workspace: "
                                     "give the script relative to it (t.py)"),
    (["-b", "compose", "--image", "mine:1", "{ws}/t.py"], "{ws}/t.py: a path on this machine"),
    (["-b", "compose", "--image", "mine:1", "{ws}/../t.py"], None),  # taken as the image's own file
    (["-b", "compose", "{ws}/../t.py"], "{ws}/../t.py: outside the workspace"),
    (["-b", "compose", "skip/t.py"], "skip/t.py: left out of the workspace image (.dockerignore"),
    (["--image", "mine:1", "missing.py"], "missing.py: no such file in the workspace"),  # local: run in place
])
def test_a_script_the_tasks_cannot_find_in_the_workspace_is_refused(tmp_path: Path, args: list[str],
                                                                    message: str | None) -> None:
    ws = tmp_path / "ws"
    for path in (tmp_path / "t.py", ws / "t.py", ws / "skip" / "t.py"):
        path.parent.mkdir(exist_ok=True)
        path.write_text("")
    (ws / ".dockerignore").write_text("skip\n")
    args = [arg.format(ws=ws) for arg in args]
    if message is None:  # accepted: planned without starting anything
        run = ScriptRun(program=args[-1], backend="compose", image="mine:1")
        assert api.script_spec(run, workdir=ws).command == ["python", args[-1]]
        return
    result = subprocess.run([*CLI, "run", *args], cwd=ws, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"tfcluster run: SCRIPT: {message.format(ws=ws)}") and result.stderr.count("\n") == 1, (
        result.stderr)


def test_a_module_gets_its_options_even_those_run_also_has_after_double_dash(tmp_path: Path) -> None:
    result = subprocess.run([*CLI, "run", "--workers", "1", "--name", "mod", "-d", "-m", "json.tool", "--sort-keys",
                             "--", "--workers"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [t.command[1:] for t in LocalState.named("mod").record.read_plan().tasks] == [
        ["-m", "json.tool", "--sort-keys", "--workers"]]  # `--` ended run's options
    subprocess.run([*CLI, "down", "mod"], capture_output=True, timeout=60, check=True)


@pytest.mark.parametrize(("args", "option"), [(["up", "spec.yaml", "--namespace", "ml"], "--namespace"),
                                               (["dry-run", "spec.yaml", "-b", "compose", "--registry", "r:5000"], "--registry")])
def test_kubernetes_options_with_another_backend_are_refused_by_up_and_dry_run_too(tmp_path: Path, args: list[str],
                                                                                 option: str) -> None:
    (tmp_path / "spec.yaml").write_text("name: t\nroles:\n  worker: {replicas: 1}\n")
    result = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "") and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"tfcluster {args[0]}: {option}: only with -b k8s"), result.stderr
    assert not LocalState.named("t").exists()



def test_registry_defaults_to_tfcluster_registry_with_k8s_only(tmp_path: Path) -> None:
    """`--registry` reads TFCLUSTER_REGISTRY (what .ci/k8s.sh exports); another backend neither refuses nor uses it."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "spec.yaml").write_text("name: t\nworkspace: ws\nroles:\n  worker: {replicas: 1}\n")
    env = {**os.environ, "TFCLUSTER_REGISTRY": "127.0.0.1:5000"}

    def dry_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "dry-run", "spec.yaml", "-o", "plan", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env=env)

    k8s = dry_run("-b", "k8s")
    assert k8s.returncode == 0, k8s.stderr
    assert '"127.0.0.1:5000/' in k8s.stdout  # the workspace layer is pushed there
    flag = dry_run("-b", "k8s", "--registry", "r.example:5000")
    assert flag.returncode == 0 and '"127.0.0.1:5000/' not in flag.stdout and '"r.example:5000/' in flag.stdout
    compose = dry_run("-b", "compose")
    assert compose.returncode == 0, compose.stderr
    assert "127.0.0.1:5000" not in compose.stdout
    help_text = subprocess.run([*CLI, "up", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "TFCLUSTER_REGISTRY" in help_text
