"""Failure rules (``restart.rules``) over real local processes: small Python programs, no TensorFlow."""

from __future__ import annotations

from pathlib import Path

from test_supervisor_processes import fail_first_run, log, role, supervise, task

from helpers.gates import BLOCK, first_run
from launcher.supervision.status import State

RULES = [{"exit_codes": [3], "action": "fail"}, {"log_pattern": "CUDA_ERROR_(ECC|LAUNCH)", "action": "restart"}]


def test_a_program_exiting_3_fails_the_job_naming_the_rule_and_restarts_nothing(tmp_path: Path) -> None:
    # without the rule its second run would succeed: the on-failure policy would restart it
    roles = {"chief": role(first_run(tmp_path / "c", BLOCK, "print('chief done')")),
             "worker": role(fail_first_run(tmp_path / "w"))}
    status, _ = supervise(tmp_path, roles, restart={"max_restarts": 5, "rules": RULES})
    assert status.state is State.FAILED
    assert status.message.startswith("failed: rule 1 (exit code 3): fail: task sup-worker-0 exited with code 3"), status.message
    assert status.restarts == 0 and task(status, "sup-worker-0").restarts == 0
    assert log(tmp_path, "sup-worker-0").count("first run fails") == 1


def test_a_log_pattern_restarts_a_failure_the_policy_would_not(tmp_path: Path) -> None:
    roles = {"worker": role(fail_first_run(tmp_path / "w", "print('RuntimeError: CUDA_ERROR_ECC', flush=True); sys.exit(1)"))}
    status, _ = supervise(tmp_path, roles, restart={"policy": "never", "rules": RULES})
    assert status.state is State.SUCCEEDED, status.message
    assert status.restarts == 1 and log(tmp_path, "sup-worker-0").count("second run ok") == 1
