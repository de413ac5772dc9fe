"""Helpers for the local backend tests: run the CLI, wait on a cluster's status, check nothing is left.

Contract: ``tfcluster`` runs the real CLI in a subprocess (inheriting the
test's ``TFCLUSTER_HOME``); ``wait_status`` polls ``LocalBackend.describe``
and fails if the job ends before the condition holds; ``assert_nothing_left``
checks that the daemon and every task process group are gone (``processes``
finds the groups, standbys' too).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from launcher.backends import supervisor_process
from launcher.backends.local.backend import LocalBackend
from launcher.backends.local.processes import group_alive
from launcher.backends.local.state import LocalState
from launcher.plan.targets import BackendKind
from launcher.protocol import env
from launcher.supervision import procfs
from launcher.supervision.procfs import stat_fields
from launcher.supervision.status import JobStatus

CLI = [sys.executable, "-m", "launcher"]


def tfcluster(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def wait_status(name: str, done: Callable[[JobStatus], bool], timeout: float) -> JobStatus:
    ends = time.monotonic() + timeout
    while True:
        status = LocalBackend().describe(name)  # None until ``up`` has written the cluster's files
        if status is not None and done(status):
            return status
        assert status is None or not status.state.terminal, f"ended before expected: {status}"
        assert time.monotonic() < ends, f"timed out; last status: {status}"
        time.sleep(0.2)


def processes(name: str) -> tuple[int | None, list[int]]:
    """The supervisor pid and the process groups of cluster ``name``: those recorded for its tasks, and those of
    any live process with one of its task names in its environment (its standbys, which are not recorded)."""
    files = LocalState.named(name)
    pid = int(files.pid.read_text()) if files.pid.exists() else None
    return pid, sorted({*files.read_groups().values(), *task_groups(name)})


def task_groups(name: str) -> set[int]:
    """Process groups of the live processes whose environment names a task of cluster ``name``: of any process on
    this host, so ``name`` must be unique to the session (``helpers.run_names.run_name``), or another session's
    run of that name (or a failed run's leftovers) would be found as this one's."""
    marker = f"{env.TASK_NAME}={name}-".encode()
    found = set()
    for proc in Path("/proc").iterdir():
        fields = stat_fields(int(proc.name)) if proc.name.isdigit() else None
        try:
            if fields is not None and fields[0] != "Z" and any(
                    v.startswith(marker) for v in (proc / "environ").read_bytes().split(b"\0")):
                found.add(int(fields[2]))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    return procfs.runs(pid, " ".join(supervisor_process.command(BackendKind.LOCAL)[1:]))  # its title (detach)


def assert_nothing_left(daemon: int | None, groups: list[int]) -> None:
    ends = time.monotonic() + 10
    while time.monotonic() < ends and ((daemon and _alive(daemon)) or any(map(group_alive, groups))):
        time.sleep(0.1)
    assert daemon is None or not _alive(daemon), "the supervisor is still running"
    assert not [g for g in groups if group_alive(g)], "task processes are still running"
