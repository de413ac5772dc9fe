"""The local backend: every task is a process on this machine, on loopback ports.

Contract: ``submit`` starts a detached supervisor daemon
(``python -m launcher.backends.local_daemon DIR``, its own session, so it
outlives the CLI) and returns once the tasks are started. Everything of
cluster NAME lives in ``registry.home()/local/NAME/``: ``plan.json``,
``state.json`` (the ``JobStatus``, rewritten by the daemon on every change),
``daemon.pid``, ``groups.json`` (task -> process group id), ``daemon.log``
and ``logs/<task>.log`` (kept after the job ends, removed by ``cancel``).
A cluster whose daemon still runs cannot be submitted again. ``cancel``
stops the daemon (which stops the tasks) and then kills every recorded
process group, so nothing of the cluster is left.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launcher import procfs, registry
from launcher.backends.api import Backend, JobStatus, LaunchError, State
from launcher.backends.local_processes import LineReader, group_runs_task, kill_group
from launcher.plan import Plan
from launcher.state_files import read_json, write_json
from launcher.targets import BackendKind

DAEMON_MODULE = "launcher.backends.local_daemon"
#: How long ``submit`` waits for the daemon to report the tasks started.
START_TIMEOUT_SECONDS = 60.0
#: How long ``cancel`` lets the daemon stop the tasks before killing everything itself.
CANCEL_TIMEOUT_SECONDS = 15.0
FOLLOW_POLL_SECONDS = 0.3


def render(plan: Plan) -> dict[str, str]:
    return {}


def create(**options: Any) -> "LocalBackend":
    return LocalBackend()


class ClusterDir:
    """The files of one local cluster (see the module contract)."""

    def __init__(self, root: Path):
        self.root = root
        self.plan = self.root / "plan.json"
        self.state = self.root / "state.json"
        self.daemon_pid = self.root / "daemon.pid"
        self.groups = self.root / "groups.json"
        self.daemon_log = self.root / "daemon.log"
        self.logs = self.root / "logs"

    @classmethod
    def of(cls, name: str) -> "ClusterDir":
        return cls(registry.home() / "local" / name)

    def exists(self) -> bool:
        return self.plan.exists()

    def log(self, task: str) -> Path:
        return self.logs / f"{task}.log"

    def read_plan(self) -> Plan:
        return Plan.model_validate_json(self.plan.read_text())

    def read_status(self) -> JobStatus | None:
        data = read_json(self.state)
        return None if data is None else JobStatus.from_dict(data)

    def write_status(self, status: JobStatus) -> None:
        write_json(self.state, status.to_dict())

    def read_groups(self) -> dict[str, int]:
        return read_json(self.groups) or {}

    def daemon(self) -> int | None:
        """Pid of this cluster's running daemon, or None."""
        try:
            pid = int(self.daemon_pid.read_text())
        except (OSError, ValueError):
            return None
        return pid if daemon_alive(pid) else None


def daemon_alive(pid: int) -> bool:
    """True if ``pid`` is a live (not zombie) local supervisor daemon."""
    return procfs.runs(pid, DAEMON_MODULE)


class LocalBackend(Backend):
    kind = BackendKind.LOCAL

    def submit(self, plan: Plan) -> None:
        files = ClusterDir.of(plan.name)
        if files.daemon() is not None:
            raise LaunchError(f"cluster {plan.name!r} is already running locally; stop it first with "
                              f"`tfcluster down {plan.name}`")
        shutil.rmtree(files.root, ignore_errors=True)
        files.logs.mkdir(parents=True)
        checkpoint_dir = plan.run_config.checkpoint_dir
        if "://" not in checkpoint_dir:
            Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        files.plan.write_text(plan.model_dump_json())
        with open(files.daemon_log, "ab") as log:
            subprocess.run(
                [sys.executable, "-m", DAEMON_MODULE, str(files.root)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, check=False,
            )
        self._await_start(files)

    def _await_start(self, files: ClusterDir) -> None:
        ends = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < ends:
            alive = files.daemon() is not None  # before reading the state: a daemon may finish in between
            status = files.read_status()
            if status is not None and status.state is not State.PENDING:
                return
            if not alive:
                break
            time.sleep(0.05)
        reason = _tail(files.daemon_log) or "the supervisor did not start in time"
        self._teardown(files)
        shutil.rmtree(files.root, ignore_errors=True)
        raise LaunchError(f"cannot start cluster {files.root.name!r}: {reason}")

    def describe(self, name: str) -> JobStatus | None:
        files = ClusterDir.of(name)
        if not files.exists():
            return None
        status = files.read_status() or JobStatus(name, self.kind, State.PENDING)
        launched = files.daemon_pid.exists()  # before that, ``submit`` is still starting the daemon
        if launched and not status.state.terminal and files.daemon() is None:
            status.state = State.FAILED
            status.message = f"the supervisor daemon is gone; see {files.daemon_log}"
        return status

    def logs(self, name: str, task: str | None = None, follow: bool = False) -> Iterator[str]:
        files = self._existing(name)
        if task is not None:
            try:
                files.read_plan().task(task)
            except KeyError as exc:
                raise LaunchError(exc.args[0]) from None
        names = [task] if task is not None else [t.name for t in files.read_plan().tasks]
        readers = {n: LineReader(files.log(n)) for n in names}
        prefix = (lambda n, line: line) if task is not None else (lambda n, line: f"{n} | {line}")
        while True:
            running = follow and files.daemon() is not None
            for n, reader in readers.items():
                for line in reader.read(final=not running):
                    yield prefix(n, line)
            if not running:
                return
            time.sleep(FOLLOW_POLL_SECONDS)

    def stop(self, name: str) -> None:
        """Stop the daemon and every task; the plan, status and logs stay for ``status``/``logs``."""
        self._teardown(self._existing(name))

    def cancel(self, name: str, volumes: bool = False) -> None:
        files = self._existing(name)
        checkpoint_dir = files.read_plan().run_config.checkpoint_dir
        self._teardown(files)
        shutil.rmtree(files.root, ignore_errors=True)
        if volumes and "://" not in checkpoint_dir:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)

    def _existing(self, name: str) -> ClusterDir:
        files = ClusterDir.of(name)
        if not files.exists():
            raise LaunchError(f"no local cluster named {name!r}")
        return files

    def _teardown(self, files: ClusterDir) -> None:
        """Stop the daemon (it stops its tasks), then kill whatever is left, daemon included."""
        pid = files.daemon()
        if pid is not None:
            procfs.terminate(pid, DAEMON_MODULE, CANCEL_TIMEOUT_SECONDS)
        for task_name, pgid in files.read_groups().items():
            if group_runs_task(pgid, task_name):
                kill_group(pgid)


def _tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""
