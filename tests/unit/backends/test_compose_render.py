"""The rendered compose file: pure, deterministic, accepted by ``docker compose config``, and safe.

No Docker engine needed; ``docker compose config`` needs only the Compose v2 CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.docker_engine import compose_cli  # noqa: F401  (fixture)
from helpers.paths import REPO  # noqa: I001
from launcher import api
from launcher.api import validate_data
from launcher.backends.compose.render import COMPOSE_FILE, TASK_HOME, TASK_USER, render
from launcher.backends.compose.runtime import override_document
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.held_program import container_program, held_program
from launcher.protocol import endpoint_wire
from launcher.spec.quantities import byte_count

ROLE_MIXES: dict[str, dict[str, Any]] = {
    "mwms": {"roles": {"chief": {"replicas": 1}, "worker": {"replicas": 2}}},
    "workers-only": {"roles": {"worker": {"replicas": 3}}},
    "single-chief": {"roles": {"chief": {"replicas": 1}}},
    "pss-evaluator": {"roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 2}, "evaluator": {}}},
    "limits-gpu": {"roles": {"chief": {"resources": {"cpu": 0.5, "memory": "1.5Gi", "gpu": 1}},
                             "worker": {"replicas": 1, "resources": {"cpu": 2, "memory": "512M"}}}},
    "restart-never": {"roles": {"worker": {"replicas": 2}}, "restart": {"policy": "never"}},
    "exit-code-no-budget": {"roles": {"worker": {"replicas": 2}}, "restart": {"policy": "exit-code", "max_restarts": 0}},
    "object-store": {"roles": {"worker": {"replicas": 2}}, "checkpoint": {"dir": "gs://bucket/run"}},
    "overrides": {"roles": {"chief": {"command": ["python", "-c", "print('$HOME ${X} \"quoted\"')"],
                                      "args": ["--flag", "a b"], "env": {"X": "1 $Y"}, "image": "my/img:1"},
                            "worker": {"replicas": 1, "port": 5000}},
                  "env": {"SHARED": "yes"}},
}


def plan_of(name: str, fields: dict[str, Any]):
    return api.plan(validate_data({"name": name, **fields}), "compose", "run-1")


def document(plan) -> dict[str, Any]:
    return yaml.safe_load(render(plan)[COMPOSE_FILE])


def unescape(value: str) -> str:
    """What Compose makes of a rendered string (``$$`` is a literal ``$``)."""
    return value.replace("$$", "$")


def test_the_supervisions_override_restarts_nothing_and_holds_each_tasks_agent_for_restarts_in_place() -> None:
    """By hand (the rendered file alone) an agent runs its task once; under ``tfcluster up`` the override gives it
    ``STACKS_PORT``, so it outlives a run and the supervisor restarts the task in its container, on the container's
    loopback only: the other tasks' containers cannot reach it, ``docker exec`` can. A task whose image
    cannot hold the agent (its own command in an image of its own) gets no port."""
    for plan in (plan_of("held", ROLE_MIXES["mwms"]), plan_of("overrides", ROLE_MIXES["overrides"])):
        override = yaml.safe_load(override_document(plan))["services"]
        assert list(override) == [t.name for t in plan.tasks]
        for task in plan.tasks:
            held = {"environment": {endpoint_wire.STACKS_PORT: str(endpoint_wire.PORT),
                                    endpoint_wire.STACKS_HOST: "127.0.0.1"}} if held_program(plan, task) else {}
            assert override[task.name] == {"restart": "no", **held}
            assert endpoint_wire.STACKS_PORT not in document(plan)["services"][task.name]["environment"]
    assert held_program(plan_of("held", ROLE_MIXES["mwms"]), plan_of("held", ROLE_MIXES["mwms"]).tasks[0]) is not None
    assert any(held_program(plan, t) is None for t in plan.tasks)


def test_root_compose_file_is_the_rendered_demo() -> None:
    rendered = api.dry_run(REPO / "examples" / "demo.yaml", "compose").files[COMPOSE_FILE]
    assert (REPO / "docker-compose.yaml").read_text() == rendered, \
        "docker-compose.yaml is stale: tfcluster render examples/demo.yaml --backend compose -d ."


@pytest.mark.parametrize("mix", sorted(ROLE_MIXES))
def test_every_task_is_one_service_applying_the_plan(mix: str) -> None:
    plan = plan_of(mix, ROLE_MIXES[mix])
    services = document(plan)["services"]
    assert list(services) == [t.name for t in plan.tasks]
    for task in plan.tasks:
        service = services[task.name]
        assert service["hostname"] == service["container_name"] == task.name
        command, held = [unescape(arg) for arg in service["command"]], held_program(plan, task)
        assert command == (held or task.command)  # under its agent where it can be, which restarts it in place
        if held:
            assert command[:3] == ["python", "-m", "launcher.worker.agent"] and command[-len(task.command) - 1:] == ["--", *task.command]
            if task.standby_command:  # a standby container is called by a signal, the agent's standby by a line
                assert json.loads(command[command.index("--standby") + 1]) == [
                    arg for arg in task.standby_command if arg != "--on-signal"] != task.standby_command
        assert {k: unescape(v) for k, v in service["environment"].items()} == plan.task_env(task)
        assert service["user"] == TASK_USER and not service["user"].startswith("0")
        assert service["init"] is True
        assert (service["read_only"], service["cap_drop"], service["security_opt"]) == \
            (True, ["ALL"], ["no-new-privileges:true"])
        assert service["tmpfs"] == ["/tmp", f"{TASK_HOME}:uid=1000,gid=1000,mode=0700"]
        assert "privileged" not in service and "cap_add" not in service
        assert service["networks"] == [naming.network_name(mix)]
        assert service["labels"][naming.LABEL_RUN] == "run-1"
        assert (service["labels"][naming.LABEL_ROLE], service["labels"][naming.LABEL_INDEX]) == (task.type.value, str(task.index))
        assert "ports" not in service and "expose" not in service and "network_mode" not in service


def test_file_is_deterministic_and_names_the_project() -> None:
    first, second = (render(plan_of("mwms", ROLE_MIXES["mwms"])) for _ in range(2))
    assert first == second
    assert yaml.safe_load(first[COMPOSE_FILE])["name"] == "mwms"


def test_checkpoint_volume_is_mounted_at_the_checkpoint_dir_except_object_stores() -> None:
    plan = plan_of("mwms", ROLE_MIXES["mwms"])
    doc = document(plan)
    volume = naming.checkpoint_volume_name("mwms")
    assert doc["volumes"] == {volume: {"name": volume, "labels": naming.labels("mwms", "run-1")}}
    for service in doc["services"].values():
        assert service["volumes"] == [{"type": "volume", "source": volume, "target": plan.run_config.checkpoint_dir}]
    remote = document(plan_of("object-store", ROLE_MIXES["object-store"]))
    assert "volumes" not in remote and all("volumes" not in s for s in remote["services"].values())


def test_a_workspace_is_each_containers_own_writable_volume_seeded_from_its_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: ws\nworkspace: .\nroles:\n  worker: {replicas: 2, command: [python, train.py]}\n")
    plan = api.plan(spec, "compose")
    assert plan.workspace is not None
    for service in document(plan)["services"].values():
        assert service["volumes"][1:] == [{"type": "volume", "target": "/workspace"}]  # no source: anonymous
    assert all(len(s["volumes"]) == 1 for s in document(plan_of("mwms", ROLE_MIXES["mwms"]))["services"].values())


def test_resources_and_restart_policy_are_mapped() -> None:
    services = document(plan_of("limits-gpu", ROLE_MIXES["limits-gpu"]))["services"]
    chief, worker = services["limits-gpu-chief-0"], services["limits-gpu-worker-0"]
    assert (chief["cpus"], chief["mem_limit"]) == (0.5, 1536 * 2**20)
    assert chief["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 1
    assert (worker["cpus"], worker["mem_limit"], "deploy" in worker) == (2, 512_000_000, False)
    assert chief["restart"] == "on-failure:3"
    assert {s["restart"] for s in document(plan_of("restart-never", ROLE_MIXES["restart-never"]))["services"].values()} == {"no"}
    assert {s["restart"] for s in document(plan_of("x", ROLE_MIXES["exit-code-no-budget"]))["services"].values()} == {"no"}


@pytest.mark.parametrize("quantity, expected", [("512Mi", 512 * 2**20), ("1G", 10**9), ("1.5Gi", 3 * 2**29),
                                                ("100", 100), ("1k", 1000)])
def test_memory_quantities_in_bytes(quantity: str, expected: int) -> None:
    assert byte_count(quantity) == expected


def test_docker_compose_config_accepts_every_rendered_file_and_the_examples(compose_cli: list[str], tmp_path: Path) -> None:  # noqa: F811
    plans = {mix: plan_of(mix, fields) for mix, fields in ROLE_MIXES.items()}
    plans.update({path.stem: api.plan(path, "compose") for path in sorted((REPO / "examples").glob("*.yaml"))})
    for mix, plan in plans.items():
        workdir = tmp_path / mix
        workdir.mkdir()
        (workdir / COMPOSE_FILE).write_text(render(plan)[COMPOSE_FILE])
        result = subprocess.run([*compose_cli, "config", "--format", "json"], cwd=workdir,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{mix}: {result.stderr}"
        services = yaml.safe_load(result.stdout)["services"]
        assert all(not s.get("ports") for s in services.values()), f"{mix}: a port is published"
        for task in plan.tasks:  # after Compose's interpolation (its output re-escapes $), exactly the plan
            got = services[task.name]
            key = "entrypoint" if task.replaces_entrypoint else "command"  # a TFJob's command: in the ENTRYPOINT's place
            assert [unescape(a) for a in got[key]] == container_program(plan, task), f"{mix}: {task.name} command changed"
            assert {k: unescape(v) for k, v in got["environment"].items()} == plan.task_env(task), f"{mix}: env changed"
            assert unescape(got["image"]) == task.image


def test_checkpoint_dir_below_the_volume_is_mounted_at_the_volume_root() -> None:
    plan = plan_of("sub", {"roles": {"worker": {"replicas": 2}}, "checkpoint": {"dir": "/checkpoints/run-a"}})
    for service in document(plan)["services"].values():
        assert service["volumes"][0]["target"] == "/checkpoints"
        assert '"checkpoint_dir":"/checkpoints/run-a"' in service["environment"]["TFCLUSTER_JOB"]


def test_checkpoint_dir_outside_the_volume_is_a_spec_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: out\nroles: {worker: {}}\ncheckpoint: {dir: /mnt/ckpt}\n")
    commands = (["validate", str(spec), "-b", "compose"], ["dry-run", str(spec), "-b", "compose"],
                ["up", str(spec), "-b", "compose"], ["render", str(spec), "-b", "compose", "--output-dir", str(tmp_path)])
    for command in commands:
        result = subprocess.run([sys.executable, "-m", "launcher", *command], capture_output=True, text=True)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"{spec}:3: checkpoint.dir: on compose must be /checkpoints or a path below it (the " \
            "checkpoint volume, writable by the non-root tasks), or a gs:// or s3:// URL; got '/mnt/ckpt'\n", result.stderr
    assert subprocess.run([sys.executable, "-m", "launcher", "validate", str(spec)], capture_output=True).returncode == 0


def test_tensorboard_container_reads_the_volumes_read_only_and_publishes_only_its_port_on_the_host() -> None:
    from launcher.backends.compose.tensorboard import container_options

    roles = {"chief": {}, "worker": {}}
    plans = {
        "a": api.plan(validate_data({"name": "a", "roles": roles, "checkpoint": {"dir": "/checkpoints/x"}}), "compose"),
        "b": api.plan(validate_data({"name": "b", "roles": roles, "checkpoint": {"dir": "gs://bucket/b"}}), "compose"),
    }
    options = container_options(plans, "127.0.0.1", 7000)
    assert options["command"] == ["python", "-m", "tensorboard.main", "--logdir_spec",
                                  "a:/runs/a/x/tensorboard,b:gs://bucket/b/tensorboard", "--host", "0.0.0.0", "--port", "6006"]
    assert options["volumes"] == {naming.checkpoint_volume_name("a"): {"bind": "/runs/a", "mode": "ro"}}
    assert options["ports"] == {"6006/tcp": ("127.0.0.1", 7000)}
    assert (options["user"], options["read_only"], options["cap_drop"]) == (TASK_USER, True, ["ALL"])
    assert options["name"] == naming.tensorboard_name("a")
    assert options["labels"][f"{naming.LABEL_TENSORBOARD}.a"] == options["labels"][f"{naming.LABEL_TENSORBOARD}.b"] == "true"
    assert "network" not in options and "network_mode" not in options  # outside the runs' networks


def test_the_tensorboard_container_runs_the_image_tensorboard_image_names() -> None:
    from launcher.backends.compose.tensorboard import container_options

    spec = {"name": "a", "image": "mine/own:1", "roles": {"worker": {}}}
    assert container_options({"a": api.plan(validate_data(spec), "compose")}, "127.0.0.1", 7000)["image"] == "mine/own:1"
    spec["tensorboard"] = {"image": "tfcluster-worker:latest"}
    plans = {"a": api.plan(validate_data(spec), "compose")}
    assert container_options(plans, "127.0.0.1", 7000)["image"] == "tfcluster-worker:latest"


def test_the_tensorboard_container_gets_the_env_of_the_runs_on_buckets_and_refuses_a_clash() -> None:
    from launcher.backends.compose.tensorboard import container_options

    def plan(name: str, directory: str, env: dict[str, str]) -> Any:
        spec = {"name": name, "roles": {"worker": {}}, "checkpoint": {"dir": directory}, "env": env}
        return api.plan(validate_data(spec), "compose")

    plans = {"a": plan("a", "/checkpoints", {"LOCAL_ONLY": "1"}), "b": plan("b", "s3://bucket/b", {"AWS_REGION": "eu-west-1"})}
    assert container_options(plans, "127.0.0.1", 7000)["environment"] == {"AWS_REGION": "eu-west-1"}
    plans["c"] = plan("c", "s3://bucket/c", {"AWS_REGION": "us-east-1"})
    with pytest.raises(LaunchError, match="runs 'b' and 'c' set AWS_REGION differently"):
        container_options(plans, "127.0.0.1", 7000)
