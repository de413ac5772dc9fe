"""The local backend's memory check: a floor per task (or the role's resources.memory) against MemAvailable."""

from __future__ import annotations

from pathlib import Path

from launcher.api import validate_data
from launcher.backends.local.capacity import (
    STANDBY_MEMORY_FLOOR,
    TASK_MEMORY_FLOOR,
    mem_available,
    memory_needed,
    memory_problems,
)

GIB = 2**30


def test_the_estimate_is_resources_memory_else_the_floor_per_task_and_once_for_the_standbys() -> None:
    roles = {"chief": {"resources": {"memory": "2Gi"}}, "worker": {"replicas": 3}, "evaluator": {}}
    spec = validate_data({"name": "m", "roles": roles})
    assert memory_needed(spec) == 2 * GIB + 4 * TASK_MEMORY_FLOOR + STANDBY_MEMORY_FLOOR  # their zygote's import
    assert memory_needed(validate_data({"name": "m", "roles": roles, "restart": {"warm": False}})) == (
        2 * GIB + 4 * TASK_MEMORY_FLOOR)
    own = validate_data({"name": "m", "command": ["python", "train.py"], "roles": roles})
    assert memory_needed(own) == 2 * GIB + 4 * TASK_MEMORY_FLOOR  # a user's program has no standby


def test_roles_with_an_env_of_their_own_count_a_zygote_each() -> None:
    roles = {"chief": {"env": {"A": "1"}}, "worker": {"replicas": 2, "env": {"A": "2"}}}
    spec = validate_data({"name": "m", "roles": roles})
    assert memory_needed(spec) == 3 * TASK_MEMORY_FLOOR + 2 * STANDBY_MEMORY_FLOOR


def test_a_cluster_over_the_available_memory_is_one_problem_naming_force() -> None:
    spec = validate_data({"name": "m", "roles": {"worker": {"replicas": 10}}, "restart": {"warm": False}})
    assert memory_problems(spec, available=10 * TASK_MEMORY_FLOOR) == []
    [problem] = memory_problems(spec, available=10 * TASK_MEMORY_FLOOR - 1)
    assert problem.path == "roles" and "the 10 tasks need at least 5.0 GiB" in problem.message
    assert "`up --force`" in problem.message


def test_the_standbys_are_named_with_the_way_to_do_without_them() -> None:
    spec = validate_data({"name": "m", "roles": {"worker": {"replicas": 2}}})
    [problem] = memory_problems(spec, available=3 * TASK_MEMORY_FLOOR - 1)
    assert ("the 2 tasks and their 2 standbys (1 process holding TensorFlow for them, 512 MiB each; `restart.warm: false` "
            "keeps none)") in problem.message


def test_meminfo_is_read_and_a_machine_that_does_not_say_is_not_refused(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:   1024 kB\n")
    assert mem_available(meminfo) == 1024 * 1024
    assert mem_available(tmp_path / "missing") is None
    assert mem_available() is not None, "this machine's /proc/meminfo has MemAvailable"
