"""The Slurm backend's pure parts: the batch script, the allocation's size, placeholder resolution, status.

No Slurm needed: ``bash -n`` checks the rendered script's syntax, and the
TF_CONFIGs resolved on an allocation are checked against TensorFlow's rules
for a cluster (every address distinct) and against the nodes given.
"""

from __future__ import annotations

import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from launcher import api
from launcher.backends.slurm import slurmctl
from launcher.backends.slurm.batch_script import PLAN, SCRIPT, batch_script, files
from launcher.backends.slurm.placement import PORT_SPAN, Node, allocation_options, port_block_problems, resolve
from launcher.backends.slurm.preemption import handed_on, requeued, resume
from launcher.backends.slurm.slurmctl import SlurmJob, records
from launcher.backends.slurm.state import Allocation, SlurmState
from launcher.backends.slurm.status import REQUEUED, REQUEUEING, describe
from launcher.errors import LaunchError
from launcher.plan.planner import Plan
from launcher.spec.models import SlurmPorts
from launcher.supervision import harness
from launcher.supervision.status import JobStatus, State, SupervisorState, TaskStatus

NODES = [Node("n1", "10.0.0.1"), Node("n2", "10.0.0.2"), Node("n3", "10.0.0.3")]


def FREE(port: int) -> bool:  # noqa: N802 (a constant predicate: no port is in use)
    return False


def plan(spec: dict[str, Any]) -> Plan:
    return api.plan(api.validate_data({"name": "job", **spec}, "slurm"), "slurm")


def sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_the_script_sizes_one_spread_allocation_and_execs_the_supervisor(tmp_path: Path) -> None:
    planned = plan({"roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}}})
    script = batch_script(planned)
    assert sbatch_lines(script) == ["--job-name=job", "--ntasks=4", "--spread-job", "--output=batch.log",
                                    "--open-mode=append", "--requeue", "--signal=B:USR1@90"]
    assert script.splitlines()[-1] == (f'exec {shlex.quote(sys.executable)} -m launcher.backends.supervisor_process '
                                       f'slurm "$SLURM_SUBMIT_DIR"')
    (tmp_path / SCRIPT).write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / SCRIPT)]).returncode == 0
    assert Plan.model_validate_json(files(planned)[PLAN]) == planned


def test_resources_and_slurm_fields_become_sbatch_options() -> None:
    planned = plan({
        "roles": {"chief": {"resources": {"cpu": 1.5, "memory": "3Gi"}},
                  "worker": {"replicas": 3, "resources": {"cpu": 1, "memory": "1Gi", "gpu": 2}}},
        "checkpoint": {"save_grace_seconds": 10},
        "slurm": {"partition": "gpu", "account": "proj1", "qos": "high", "time_limit": "1-12:00", "constraint": "a100",
                  "exclusive": True, "tasks_per_node": 2, "sbatch_options": ["--mail-type=END"],
                  "setup": ["module load cuda", "source /shared/venv/bin/activate"], "python": "/shared/venv/bin/python"},
    })
    script = batch_script(planned)
    assert sbatch_lines(script) == [
        "--job-name=job", "--ntasks=4", "--nodes=2", "--ntasks-per-node=2", "--cpus-per-task=2", "--mem-per-cpu=1536M",
        "--gpus-per-task=2", "--partition=gpu", "--account=proj1", "--qos=high", "--time=1-12:00", "--constraint=a100",
        "--exclusive", "--mail-type=END", "--output=batch.log", "--open-mode=append", "--requeue", "--signal=B:USR1@40",
    ]
    assert allocation_options(planned)[-1] == "--mail-type=END"
    body = script.splitlines()
    assert body[-3:] == ["module load cuda", "source /shared/venv/bin/activate",
                         'exec /shared/venv/bin/python -m launcher.backends.supervisor_process slurm "$SLURM_SUBMIT_DIR"']
    assert all(t.command[0] == "/shared/venv/bin/python" for t in planned.tasks)


def test_placeholders_resolve_to_the_nodes_addresses_with_distinct_ports() -> None:
    planned = plan({"roles": {"chief": {}, "worker": {"replicas": 3}, "evaluator": {}}})
    assert [t.address for t in planned.tasks] == ["${node:0}:${port:0}", "${node:1}:${port:1}", "${node:2}:${port:2}",
                                                  "${node:3}:${port:3}", "${node:4}:${port:4}"]
    resolved, placement = resolve(planned, NODES, "0", 0, FREE)  # job 0, secret 0: the first block, from the base port
    assert placement == {"job-chief-0": "n1", "job-worker-0": "n2", "job-worker-1": "n3", "job-worker-2": "n1",
                         "job-evaluator-0": "n2"}  # spread: slots wrap around the allocation's nodes
    assert resolved.cluster == {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2223", "10.0.0.3:2224", "10.0.0.1:2225"]}
    worker = resolved.task("job-worker-2")
    assert resolved.tf_config(worker)["cluster"] == resolved.cluster and worker.address == "10.0.0.1:2225"
    assert worker.port == 2225 and "${" not in resolved.model_dump_json()
    on_one = resolve(planned, NODES[:1], "0", 0, FREE)[0]
    assert len({t.address for t in on_one.tasks}) == len(on_one.tasks)  # one node: still no two tasks share a port


def _ports(planned: Plan, job_id: str, secret: int = 0) -> set[int]:
    return {t.port for t in resolve(planned, NODES[:1], job_id, secret, FREE)[0].tasks}


def test_jobs_sharing_a_node_get_disjoint_ports_from_their_job_ids() -> None:
    planned = plan({"roles": {"chief": {}, "worker": {"replicas": 2}}, "slurm": {"ports": "job-id"}})
    blocks = PORT_SPAN // 3
    assert _ports(planned, "41") == {2222 + 41 * 3 + i for i in range(3)}
    assert _ports(planned, "41", secret=12345) == _ports(planned, "41")  # job-id: the secret plays no part
    assert _ports(planned, "41") == _ports(planned, "41")  # a requeued job keeps its ports
    ids = [str(n) for n in range(1000, 1000 + blocks)]  # any two jobs submitted fewer than `blocks` apart
    taken = [port for job_id in ids for port in _ports(planned, job_id)]
    assert len(taken) == len(set(taken)) and min(taken) == 2222 and max(taken) < 2222 + PORT_SPAN
    assert _ports(planned, "1000") == _ports(planned, str(1000 + blocks))  # the residual risk docs/slurm.md states


def test_random_ports_come_from_the_jobs_secret_not_from_its_public_id() -> None:
    planned = plan({"roles": {"chief": {}, "worker": {"replicas": 2}}})
    assert planned.spec.slurm.ports is SlurmPorts.RANDOM  # the default
    blocks = PORT_SPAN // 3
    secret = 0x5EC2E7
    first = min(_ports(planned, "41", secret))
    assert _ports(planned, "41", secret) == set(range(first, first + 3))  # one block, the same on a requeue
    assert (first - 2222) // 3 == (41 + secret) % blocks and first != 2222 + 41 * 3
    by_secret = {min(_ports(planned, "41", s)) for s in range(0, 10**9, 10**9 // 200)}
    assert len(by_secret) > 150  # the job id alone does not tell the block
    ids = [str(n) for n in range(1000, 1000 + blocks)]  # one secret (a rendered job submitted again and again)
    taken = [port for job_id in ids for port in _ports(planned, job_id, secret)]
    assert len(taken) == len(set(taken)) and min(taken) == 2222 and max(taken) < 2222 + PORT_SPAN


def test_a_block_with_a_port_in_use_gives_way_to_the_next_block_free_of_them() -> None:
    planned = plan({"roles": {"worker": {"replicas": 2, "port": 65526}}, "slurm": {"ports": "job-id"}})  # 5 blocks

    def first(job_id: int, held: set[int]) -> int:
        return min(t.port for t in resolve(planned, NODES[:1], str(job_id), 0, held.__contains__)[0].tasks)

    assert first(1, set()) == 65528  # its own block
    assert first(1, {65529}) == 65530 and first(1, {65529, 65530}) == 65532  # the next free one
    assert first(4, {65535}) == 65526  # past the last block: the first
    assert first(1, set(range(65526, 65536))) == 65528  # none free: its own (its task fails as a crash would)


def test_the_port_blocks_stay_below_65536() -> None:
    planned = plan({"roles": {"worker": {"replicas": 4, "port": 65530}}})
    taken = {port for job_id in range(50) for port in _ports(planned, str(job_id), secret=job_id * 7919)}
    assert max(taken) == 65533 and min(taken) == 65530  # one block fits: every job gets it


@pytest.mark.parametrize(("roles", "field"), [
    ({"worker": {"replicas": 1000, "port": 65000}}, "roles.worker.port"),
    ({"chief": {"port": 65530}, "worker": {"replicas": 7, "port": 65529}}, "roles.worker.port"),  # the lowest port
])
def test_a_port_block_past_65535_is_one_problem_at_the_base_port(roles: dict[str, Any], field: str) -> None:
    [problem] = port_block_problems(api.validate_data({"name": "job", "roles": roles}))
    assert problem.path == field and "past 65535" in problem.message


def test_a_port_block_ending_at_65535_fits() -> None:
    assert port_block_problems(api.validate_data({"name": "job", "roles": {"worker": {"replicas": 536, "port": 65000}}})) == []


def test_the_port_secret_is_drawn_once_and_kept_owner_only(tmp_path: Path) -> None:
    state = SlurmState(tmp_path / "job")
    state.root.mkdir()
    secret = state.port_secret()
    assert state.port_secret() == secret  # a requeued job's supervisor reads it back: the same ports
    assert stat.S_IMODE(state.secret.stat().st_mode) == 0o600
    other = SlurmState(tmp_path / "other")
    other.root.mkdir()
    assert other.port_secret() != secret


def test_an_allocation_without_nodes_is_refused() -> None:
    with pytest.raises(LaunchError, match="no nodes"):
        resolve(plan({"roles": {"worker": {"replicas": 2}}}), [], "7", 0, FREE)


def test_scontrol_records_parse_as_key_value_pairs() -> None:
    [record] = records("JobId=7 JobName=job JobState=PENDING Reason=BeginTime Restarts=1 NodeList=(null) Comment=\n")
    assert (record["JobState"], record["Reason"], record["Restarts"], record["Comment"]) == ("PENDING", "BeginTime", "1", "")


def _written(planned: Plan, state: State) -> JobStatus:
    return JobStatus(planned.name, planned.backend, state, tasks=[TaskStatus(t.name, state) for t in planned.tasks],
                     message=state.value)


@pytest.mark.parametrize(("written", "allocation", "job", "state", "supervisor", "says"), [
    (None, None, SlurmJob("PENDING", "Resources", 0, ""), State.PENDING, None, "waiting for an allocation (Resources)"),
    (None, None, SlurmJob("RUNNING", "None", 0, "n[1-3]"), State.PENDING, SupervisorState.ALIVE, "starting the tasks"),
    (State.RUNNING, 0, SlurmJob("RUNNING", "None", 0, "n[1-3]"), State.RUNNING, SupervisorState.ALIVE, "running"),
    (State.SUCCEEDED, 0, None, State.SUCCEEDED, SupervisorState.EXITED, "succeeded"),
    # requeued: what the old allocation wrote is not the job's state
    (State.CANCELLED, 0, SlurmJob("PENDING", "BeginTime", 1, ""), State.RESTARTING, None, "requeued: waiting"),
    (State.CANCELLED, 0, SlurmJob("RUNNING", "None", 1, "n1"), State.RESTARTING, None, "requeued (Slurm restart 1)"),
    (State.CANCELLED, 0, SlurmJob("COMPLETING", "None", 1, "n1"), State.RESTARTING, None, "requeued"),
    # the allocation ended under a supervisor that never finished: never `running`
    (State.RUNNING, 0, SlurmJob("FAILED", "NonZeroExitCode", 0, "n1"), State.FAILED, SupervisorState.LOST, "ended FAILED"),
    (State.RUNNING, 0, SlurmJob("CANCELLED", "None", 0, "n1"), State.CANCELLED, SupervisorState.LOST, "ended CANCELLED"),
    (State.RUNNING, 0, None, State.FAILED, SupervisorState.LOST, "no longer known to the controller"),
    (None, None, None, State.FAILED, SupervisorState.LOST, "no longer known"),
])
def test_status_is_the_supervisors_made_true_by_the_controller(
    written: State | None, allocation: int | None, job: SlurmJob | None, state: State,
    supervisor: SupervisorState | None, says: str,
) -> None:
    planned = plan({"roles": {"worker": {"replicas": 2}}})
    status = describe(planned, None if written is None else _written(planned, written),
                      None if allocation is None else Allocation(job_id="7", restarts=allocation, nodes={}), job, "batch.log")
    assert (status.state, status.supervisor) == (state, supervisor), status
    assert says in status.message, status.message
    if state.terminal:
        assert all(t.state.terminal for t in status.tasks)


@pytest.mark.parametrize("message", [REQUEUEING, REQUEUED])
def test_a_job_its_supervisor_requeues_is_restarting_while_the_controller_shows_it_ended(message: str) -> None:
    planned = plan({"roles": {"worker": {"replicas": 2}}})
    written = _written(planned, State.RESTARTING)
    written.message = message
    allocation = Allocation(job_id="7", restarts=0, nodes={})
    status = describe(planned, written, allocation, SlurmJob("FAILED", "None", 0, "n1"), "batch.log")
    assert status.state is State.RESTARTING, status
    requeue_counted = SlurmJob("FAILED", "None", 1, "n1")  # the controller counts the restart before the new allocation
    assert describe(planned, written, allocation, requeue_counted, "batch.log").state is State.RESTARTING
    assert describe(planned, written, allocation, None, "batch.log").state is State.FAILED  # forgotten: it never came back
    assert describe(planned, written, allocation, SlurmJob("CANCELLED", "None", 1, "n1"), "batch.log").state is State.CANCELLED


def test_a_requeued_job_counts_one_preemption_and_restarts_every_task() -> None:
    planned = plan({"roles": {"worker": {"replicas": 2}}})
    before = _written(planned, State.CANCELLED)
    before.restarts, before.preemptions = 1, 2
    after = requeued(before)
    assert (after.state, after.restarts, after.preemptions) == (State.RESTARTING, 1, 3)
    assert all(t.state is State.RESTARTING and t.preemptions == 1 and t.exit_code is None for t in after.tasks)


@pytest.mark.parametrize(("used", "resumes"), [(0, True), (1, True), (2, False)])
def test_a_requeue_resumes_within_max_preemptions_and_fails_past_it(used: int, resumes: bool) -> None:
    planned = plan({"roles": {"worker": {"replicas": 2}}, "restart": {"max_preemptions": 2}})
    before = _written(planned, State.RUNNING)
    before.preemptions = used
    if resumes:
        after = resume(planned, before)
        assert after is not None and after.preemptions == used + 1 and after.state is State.RESTARTING
        return
    with pytest.raises(harness.CannotRun, match=r"preempted 3 times, past restart.max_preemptions \(2\)") as failed:
        resume(planned, before)
    assert failed.value.base is not None and failed.value.base.preemptions == 3


@pytest.mark.parametrize(
    ("restart", "option"),
    [
        ({}, "--requeue"),
        ({"policy": "never", "max_preemptions": 0}, "--no-requeue"),  # nothing may ever run it again
        ({"policy": "never", "max_preemptions": 0, "rules": [{"signals": ["SIGKILL"], "action": "restart"}]},
         "--requeue"),  # a failure rule restarts
        ({"policy": "never", "max_preemptions": 0, "max_restarts": 0,
          "rules": [{"signals": ["SIGKILL"], "action": "restart"}]}, "--no-requeue"),  # with no budget to do it
        ({"policy": "never"}, "--requeue"),  # a preemption restarts
    ],
)
def test_requeue_only_where_a_rule_the_policy_or_a_preemption_can_restart(restart: dict[str, Any], option: str) -> None:
    lines = sbatch_lines(batch_script(plan({"roles": {"worker": {"replicas": 2}}, "restart": restart})))
    assert option in lines and not {"--requeue", "--no-requeue"} - {option} & set(lines)


@pytest.mark.parametrize(("job", "says"), [
    (SlurmJob("PENDING", "BeginTime", 2, ""), REQUEUED),  # requeued: its restart count rose past this allocation's
    (SlurmJob("CANCELLED", "None", 1, "n1"), None),  # scancel: cancelled
    (None, None),  # forgotten by the controller
    (LaunchError("slurm_load_jobs error: Socket timed out"), None),  # the controller silent: not known requeued
])
def test_an_allocation_ended_by_a_requeue_is_handed_on(monkeypatch: pytest.MonkeyPatch, job: Any, says: str | None) -> None:
    def read(job_id: str, retries: int) -> SlurmJob | None:
        if isinstance(job, Exception):
            raise job
        return job

    monkeypatch.setattr(slurmctl, "job", read)
    assert handed_on("7", 1)() == says
