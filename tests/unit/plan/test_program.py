"""The user's own program in the plan: the cluster-level command, which roles run it, and its environment."""

from __future__ import annotations

from launcher import api
from launcher.protocol import env
from launcher.protocol.events import MANUAL_TOKEN
from launcher.spec.models import RoleType


def _plan(**fields):
    spec = api.validate_data({"name": "byo", **fields})
    return api.plan(spec, "local")


def test_cluster_command_runs_on_every_task_of_mwms_and_a_role_command_wins() -> None:
    plan = _plan(command=["python", "train.py"], roles={
        "worker": {"replicas": 3, "args": ["--fast"]}, "evaluator": {"command": ["python", "eval.py"]}})
    commands = {t.name: t.command for t in plan.tasks}
    assert commands == {
        "byo-worker-0": ["python", "train.py", "--fast"], "byo-worker-1": ["python", "train.py", "--fast"],
        "byo-worker-2": ["python", "train.py", "--fast"], "byo-evaluator-0": ["python", "eval.py"]}


def test_under_parameter_server_ps_and_workers_run_the_built_in_server() -> None:
    plan = _plan(command=["python", "coordinate.py"], roles={
        "chief": {}, "worker": {"replicas": 2}, "ps": {}, "evaluator": {}})
    by_role = {t.type: t.command for t in plan.tasks}
    assert by_role[RoleType.CHIEF] == by_role[RoleType.EVALUATOR] == ["python", "coordinate.py"]
    assert by_role[RoleType.PS][1:] == by_role[RoleType.WORKER][1:] == ["-m", "launcher.worker"]
    built_in = _plan(roles={"chief": {}, "worker": {}, "ps": {}})
    assert plan.policy.linger_seconds < built_in.policy.linger_seconds
    own = _plan(roles={"chief": {"command": []}, "worker": {}, "ps": {}})  # [] runs the image's own program
    assert own.policy.linger_seconds == plan.policy.linger_seconds
    assert (plan.run_config.lead_runs_entrypoint, built_in.run_config.lead_runs_entrypoint) == (False, True)  # the job's progress counts to


def test_every_task_gets_the_program_environment() -> None:
    plan = _plan(roles={"worker": {"replicas": 2}})
    lead, other = (plan.task_env(t) for t in plan.tasks)
    checkpoints = plan.run_config.checkpoint_dir
    assert lead[env.CHECKPOINT_DIR] == other[env.CHECKPOINT_DIR] == checkpoints
    assert lead[env.BACKUP_DIR] == f"{checkpoints}/backup" and lead[env.MODEL_DIR] == f"{checkpoints}/model"
    assert (lead[env.IS_CHIEF], other[env.IS_CHIEF]) == ("1", "0")
    assert (lead[env.TASK_NAME], other[env.TASK_NAME]) == ("byo-worker-0", "byo-worker-1")
    assert lead[env.RUN_ID] == plan.run_id and lead[env.LEGACY_KERAS] == "1" and env.GRPC_FAIL_FAST in lead
    assert plan.workdir is not None


def test_each_launch_gives_its_tasks_a_fresh_event_token_in_a_variable_of_its_own() -> None:
    """What a program prints of its config (TF_CONFIG, TFCLUSTER_JOB) never holds it; a preview's is fixed."""
    spec = api.validate_data({"name": "byo", "roles": {"worker": {"replicas": 2}}})
    launches = [api.plan(spec, "local", api.new_run_id(), launching=True) for _ in range(2)]
    assert launches[0].event_token != launches[1].event_token and len(launches[0].event_token) == 32
    for plan in launches:
        for task in plan.tasks:
            variables = plan.task_env(task)
            assert variables[env.EVENT_TOKEN] == plan.event_token
            assert plan.event_token not in variables[env.TF_CONFIG] + variables[env.JOB]
    assert api.plan(spec, "local").event_token == api.plan(spec, "compose").event_token == MANUAL_TOKEN


def test_run_ships_the_current_directory_and_names_the_registry() -> None:
    from launcher.plan.script import ScriptRun, script_spec_data

    data = script_spec_data(ScriptRun(program="train.py", registry="127.0.0.1:5000"))
    assert data["workspace"] == "." and data["kubernetes"] == {"registry": "127.0.0.1:5000"}
    kept = script_spec_data(ScriptRun(program="train.py"), {"roles": {"worker": {}}, "workspace": "src", "kubernetes": {}})
    assert kept["workspace"] == "src" and kept["kubernetes"] == {}
