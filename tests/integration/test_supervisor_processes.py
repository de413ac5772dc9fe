"""The supervisor driving real local processes (command overrides running small Python scripts).

Each task's command is ``python -c SCRIPT``; scripts use marker files in
``tmp_path`` to behave differently on their first and later runs, and wait
for marker files (``helpers.gates``) that another task or the supervisor's
published status creates, so events happen in the order a test states
whatever the machine's load.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from helpers.gates import BLOCK, first_run, touch, wait_for
from helpers.task_events import print_event
from launcher import api
from launcher.api import validate_data
from launcher.backends.local.processes import ProcessRuntime, TaskRun, group_alive
from launcher.protocol.exitcodes import LOST_EXIT
from launcher.supervision.stack_dumps import write_stacks
from launcher.supervision.status import JobStatus, State
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

OK = "print('done')"


def fail_first_run(marker: Path, how: str = "sys.exit(3)", later: str = "pass") -> str:
    """A script that fails on its first run (``how``) and on the next runs runs ``later`` and exits 0."""
    return first_run(marker, f"import os, signal, sys; print('first run fails', flush=True); {how}",
                     f"print('second run ok', flush=True)\n{later}")


def when_succeeded(task_name: str, path: Path) -> Callable[[JobStatus], None]:
    """A status listener that creates ``path`` once the supervisor has published ``task_name`` as succeeded."""

    def listen(status: JobStatus) -> None:
        if any(t.name == task_name and t.state is State.SUCCEEDED for t in status.tasks):
            path.touch()

    return listen


def role(script: str, replicas: int = 1) -> dict[str, Any]:
    return {"replicas": replicas, "command": [sys.executable, "-c", script]}


def supervise(tmp_path: Path, roles: dict[str, Any], grace: float = 0.5, on_status: Callable[[JobStatus], None] | None = None,
              **fields: Any) -> tuple[JobStatus, ProcessRuntime]:
    checkpoint = {"dir": str(tmp_path / "ckpt"), **fields.pop("checkpoint", {})}
    spec = validate_data({"name": "sup", "roles": roles, "checkpoint": checkpoint, **fields})
    plan = api.plan(spec, "local", launching=True)
    groups: dict[str, int] = {}
    runtime = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", on_runs=lambda runs: groups.update({n: r.pgid for n, r in runs.items()}))
    status = Supervisor(plan, runtime, on_status=on_status or (lambda _: None), keep_stacks=partial(write_stacks, tmp_path / "stacks"),
                        tuning=Tuning(poll_seconds=0.1, linger_seconds=grace)).run()
    assert groups and not any(group_alive(pgid) for pgid in groups.values()), "a task outlived the supervisor"
    return status, runtime


def task(status: JobStatus, name: str):
    return next(t for t in status.tasks if t.name == name)


def log(tmp_path: Path, name: str) -> str:
    return (tmp_path / "logs" / f"{name}.log").read_text()


def test_failed_worker_gang_restarts_everyone_then_succeeds(tmp_path: Path) -> None:
    # the chief's first run lives until the gang restart stops it; its second exits 0. The worker's first run fails
    # only once the chief's first run has begun (its marker): else a restart could stop the chief before that, and
    # its next run, taking itself for the first, would block for ever
    roles = {"chief": role("print('chief up', flush=True)\n" + first_run(tmp_path / "c", BLOCK)),
             "worker": role(fail_first_run(tmp_path / "w1", wait_for(tmp_path / "c") + "\nsys.exit(3)"), replicas=1)}
    status, _ = supervise(tmp_path, roles)
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1
    assert task(status, "sup-chief-0").restarts == 1 and task(status, "sup-worker-0").restarts == 1
    assert log(tmp_path, "sup-chief-0").count("chief up") == 2


def test_exit_code_policy_fails_on_a_bug(tmp_path: Path) -> None:
    roles = {"worker": role(fail_first_run(tmp_path / "m"))}
    status, _ = supervise(tmp_path, roles, restart={"policy": "exit-code"})
    assert status.state is State.FAILED and status.restarts == 0
    assert "sup-worker-0" in status.message and "code 3" in status.message


def test_exit_code_policy_retries_a_killed_task(tmp_path: Path) -> None:
    roles = {"worker": role(fail_first_run(tmp_path / "m", "os.kill(os.getpid(), signal.SIGKILL)"))}
    status, _ = supervise(tmp_path, roles, restart={"policy": "exit-code"})
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1


def test_budget_exhausted_names_the_task_and_its_last_error(tmp_path: Path) -> None:
    script = "import sys; print('training...'); print('OSError: disk on fire', file=sys.stderr); sys.exit(4)"
    roles = {"chief": role(BLOCK), "worker": role(script)}
    status, _ = supervise(tmp_path, roles, restart={"max_restarts": 2})
    assert status.state is State.FAILED
    assert status.restarts == 2
    assert "sup-worker-0" in status.message and "OSError: disk on fire" in status.message
    assert task(status, "sup-worker-0").exit_code == 4


def test_failed_event_reason_is_the_last_error(tmp_path: Path) -> None:
    event = print_event('{"event":"failed","task":"sup-worker-0","time":0,"reason":"dataset is empty"}')
    roles = {"worker": role(f"import sys\n{event}\nprint('Traceback tail'); sys.exit(1)")}
    status, _ = supervise(tmp_path, roles, restart={"policy": "never"})
    assert status.state is State.FAILED and "dataset is empty" in status.message


def test_deadline_fails_and_stops_everything(tmp_path: Path) -> None:
    status, _ = supervise(tmp_path, {"chief": role(BLOCK), "worker": role(BLOCK)}, deadline_seconds=1)
    assert status.state is State.FAILED and "deadline" in status.message
    assert all(t.state is State.CANCELLED for t in status.tasks)


def test_pss_worker_failure_restarts_only_that_worker(tmp_path: Path) -> None:
    # the chief ends once the worker runs again, so the restart happens before the job ends
    roles = {"chief": role(wait_for(tmp_path / "w-again")), "worker": role(fail_first_run(tmp_path / "w", later=touch(tmp_path / "w-again"))),
             "ps": role(BLOCK)}
    status, _ = supervise(tmp_path, roles, strategy="parameter_server")
    assert status.state is State.SUCCEEDED, status.message
    assert [task(status, n).restarts for n in ("sup-chief-0", "sup-worker-0", "sup-ps-0")] == [0, 1, 0]
    assert task(status, "sup-ps-0").state is State.CANCELLED  # outlived the grace period, then stopped


def test_pss_ps_failure_restarts_every_training_task(tmp_path: Path) -> None:
    roles = {"chief": role(first_run(tmp_path / "c", BLOCK)), "worker": role(BLOCK),
             "ps": role(fail_first_run(tmp_path / "ps", "os.kill(os.getpid(), signal.SIGKILL)", later=BLOCK))}
    status, _ = supervise(tmp_path, roles, strategy="parameter_server")
    assert status.state is State.SUCCEEDED, status.message
    assert [task(status, n).restarts for n in ("sup-chief-0", "sup-worker-0", "sup-ps-0")] == [1, 1, 1]


def test_evaluator_failure_restarts_only_the_evaluator(tmp_path: Path) -> None:
    again = tmp_path / "e-again"  # the training tasks end once the evaluator runs again
    roles = {"chief": role(wait_for(again)), "worker": role(wait_for(again)),
             "evaluator": role(fail_first_run(tmp_path / "e", later=touch(again) + "\n" + BLOCK))}
    status, _ = supervise(tmp_path, roles)
    assert status.state is State.SUCCEEDED, status.message
    assert [task(status, n).restarts for n in ("sup-chief-0", "sup-worker-0", "sup-evaluator-0")] == [0, 0, 1]


def test_a_task_that_ignores_the_notice_is_killed_after_save_grace_seconds(tmp_path: Path) -> None:
    """The fault table's "SIGKILL after the grace": worker 0 is preempted (exits 143); the chief, told to save
    (SIGTERM), never finishes: it notes the notice and goes on. Once ``save_grace_seconds`` ran out the
    supervisor kills it, and the group restarts as after any preemption, using none of the restart budget."""
    ready, noticed = tmp_path / "chief-ignores-sigterm", tmp_path / "chief-got-sigterm"
    ignore = (f"import pathlib, signal\nsignal.signal(signal.SIGTERM, lambda *_: pathlib.Path({str(noticed)!r}).touch())\n"
              f"{touch(ready)}\nwhile True:\n    signal.pause()")
    later = f"import pathlib; print('got the notice:', pathlib.Path({str(noticed)!r}).exists(), flush=True)"
    roles = {"chief": role(first_run(tmp_path / "c", ignore, later)),
             "worker": role(first_run(tmp_path / "w", f"{wait_for(ready)}\nsys.exit(143)", BLOCK))}
    status, _ = supervise(tmp_path, roles, checkpoint={"save_grace_seconds": 1}, restart={"max_restarts": 0})
    assert status.state is State.SUCCEEDED, status.message
    assert (status.restarts, status.preemptions) == (0, 1)
    assert "got the notice: True" in log(tmp_path, "sup-chief-0")  # it had the notice, ignored it, and was killed


def test_chief_policy_succeeds_without_waiting_for_workers(tmp_path: Path) -> None:
    status, _ = supervise(tmp_path, {"chief": role(OK), "worker": role(BLOCK)})
    assert status.state is State.SUCCEEDED
    assert task(status, "sup-worker-0").state is State.CANCELLED


def test_all_workers_policy_waits_for_the_workers(tmp_path: Path) -> None:
    seen = tmp_path / "chief-seen"  # the workers end only after the supervisor saw the chief succeed
    roles = {"chief": role(OK), "worker": role(wait_for(seen), replicas=2)}
    status, _ = supervise(tmp_path, roles, success_policy="all-workers", on_status=when_succeeded("sup-chief-0", seen))
    assert status.state is State.SUCCEEDED
    assert all(t.state is State.SUCCEEDED and t.exit_code == 0 for t in status.tasks)


def test_tasks_exiting_by_themselves_in_the_grace_period_count_as_done(tmp_path: Path) -> None:
    seen = tmp_path / "chief-seen"  # the servers end only after the supervisor saw the chief succeed: in the linger
    roles = {"chief": role(OK), "ps": role(wait_for(seen)), "worker": role(wait_for(seen))}
    status, _ = supervise(tmp_path, roles, grace=60, strategy="parameter_server", on_status=when_succeeded("sup-chief-0", seen))
    assert status.state is State.SUCCEEDED
    assert all(t.state is State.SUCCEEDED for t in status.tasks), status.tasks


def test_progress_events_reach_the_job_status(tmp_path: Path) -> None:
    event = print_event('{"event":"step","task":"sup-chief-0","time":0,"epoch":1,"step":7,"total_steps":30,"loss":0.5}')
    status, _ = supervise(tmp_path, {"chief": role(event)})
    assert status.progress.step == 7 and status.progress.loss == 0.5


def test_a_command_that_cannot_start_fails_the_job(tmp_path: Path) -> None:
    roles = {"chief": role(BLOCK), "worker": {"replicas": 1, "command": [str(tmp_path / "no-such-program")]}}
    status, _ = supervise(tmp_path, roles)
    assert status.state is State.FAILED and "sup-worker-0" in status.message


def test_a_second_runtime_adopts_a_run_and_reads_its_exit_code_though_not_its_parent(tmp_path: Path) -> None:
    go = tmp_path / "go"
    spec = validate_data({"name": "adp", "roles": {"worker": role(f"print('hi', flush=True)\n{wait_for(go)}\nsys.exit(7)")}})
    plan = api.plan(spec, "local", launching=True)
    records: dict = {}
    first = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", on_runs=records.update)
    first.start(plan.tasks[0])
    second = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", recorded=records)
    assert second.adopt(plan.tasks[0]) and second.poll(plan.tasks[0]) is None
    go.touch()
    ends = time.monotonic() + 10
    while (code := second.poll(plan.tasks[0])) is None and time.monotonic() < ends:
        time.sleep(0.05)
    assert code == 7 and second.output(plan.tasks[0]) == ["hi"]
    first.stop(plan.tasks, grace_seconds=5)  # reaps the shell


def test_an_adopted_group_id_the_system_reused_is_never_signalled(tmp_path: Path) -> None:
    plan = api.plan(validate_data({"name": "adp", "roles": {"worker": role(BLOCK)}}), "local", launching=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        runtime = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", recorded={"adp-worker-0": TaskRun(stranger.pid)})
        assert runtime.adopt(plan.tasks[0])
        assert runtime.poll(plan.tasks[0]) == LOST_EXIT and "without an exit code" in runtime.output(plan.tasks[0])[-1]
        runtime.stop(plan.tasks, grace_seconds=5)
        assert stranger.poll() is None, "a process that is not the task's was signalled"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_stall_of_a_program_without_the_handler_keeps_its_stacks_read_by_py_spy(tmp_path: Path) -> None:
    """The chief reports a step (a bare event line: no launcher import, no handler), then never returns."""
    step = print_event('{"event":"step","task":"sup-chief-0","time":0,"step":1}')
    stuck = f"import signal\ndef stuck_in_my_loader():\n    signal.pause()\n{step}\nstuck_in_my_loader()"
    status, _ = supervise(tmp_path, {"chief": role(stuck)}, stall={"timeout_seconds": 1, "action": "fail"})
    assert status.state is State.FAILED and status.stall is not None and status.stall.stalls == 1, status.message
    dump = (tmp_path / "stacks" / "stall-1" / "sup-chief-0.txt").read_text()
    assert dump.startswith("Process ") and "stuck_in_my_loader (<string>:3)" in dump, dump


#: Stands in for ``launcher.worker.standby`` (which imports TensorFlow): waits for its line, appends to that log.
STANDBY = """
import os, sys
log = sys.stdin.readline().strip()
if not log:
    sys.exit(0)
out = os.open(log, os.O_WRONLY | os.O_APPEND)
os.dup2(out, 1)
print('ran in the standby', os.getpid(), flush=True)
sys.exit(7)
"""


def standby_task(tmp_path: Path, standby: str) -> tuple[Any, Any]:
    """A plan of one worker printing ``afresh`` and its task with ``standby`` as its standby's program."""
    plan = api.plan(validate_data({"name": "stb", "roles": {"worker": role("print('afresh', flush=True)")}}), "local",
                    launching=True)
    return plan, plan.tasks[0].model_copy(update={"standby_command": [sys.executable, "-c", standby]})


def test_a_start_becomes_the_standby_whose_exit_code_an_adopting_runtime_reads(tmp_path: Path) -> None:
    plan, worker = standby_task(tmp_path, STANDBY)
    records: dict = {}
    first = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", on_runs=records.update)
    first.prepare([worker])
    [standby] = first._standbys.values()
    first.start(worker)
    assert records[worker.name].pgid == standby.process.pid  # the run is the standby's group
    second = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", recorded=records)
    assert second.adopt(worker)
    ends = time.monotonic() + 10
    while (code := second.poll(worker)) is None and time.monotonic() < ends:
        time.sleep(0.05)
    assert code == 7, "the wrapper wrote the standby's exit code where the task's is read"
    assert [line.split()[:4] for line in second.output(worker)] == [["ran", "in", "the", "standby"]]
    first.close()


def test_a_run_in_a_standby_keeps_its_exit_code_when_the_adopting_runtime_prepares_a_new_standby(tmp_path: Path) -> None:
    """Every local run of the entrypoint is a standby's: a supervisor that adopts it prepares the task's next standby
    while it runs, which must not take the file the run's wrapper writes its code through."""
    gate = tmp_path / "gate"
    plan, worker = standby_task(tmp_path, STANDBY.replace("print(", f"{wait_for(gate)}\nprint(", 1))
    records: dict = {}
    first = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", on_runs=records.update)
    first.prepare([worker])
    first.start(worker)
    second = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits", recorded=records)
    assert second.adopt(worker)
    second.prepare([worker])  # as a supervisor does once it has the tasks running
    gate.touch()
    ends = time.monotonic() + 10
    while (code := second.poll(worker)) is None and time.monotonic() < ends:
        time.sleep(0.05)
    assert code == 7, "the adopted run's exit code was lost"
    first.close()
    second.close()


def test_a_standby_that_ended_is_replaced_by_a_fresh_start_and_close_ends_those_waiting(tmp_path: Path) -> None:
    plan, worker = standby_task(tmp_path, "pass")  # ends at once, as a standby killed by the OOM killer would
    runtime = ProcessRuntime(plan, tmp_path / "logs", tmp_path / "exits")
    runtime.prepare([worker])
    [gone] = runtime._standbys.values()
    gone.process.wait()
    runtime.start(worker)
    ends = time.monotonic() + 10
    while (code := runtime.poll(worker)) is None and time.monotonic() < ends:
        time.sleep(0.05)
    assert code == 0 and runtime.output(worker) == ["afresh"]
    _, waiting = standby_task(tmp_path, STANDBY)
    runtime.prepare([waiting])
    [standby] = runtime._standbys.values()
    runtime.close()
    assert standby.process.poll() is not None and not group_alive(standby.process.pid)
