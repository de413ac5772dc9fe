"""Serving TensorBoard for runs: what every backend's ``Backend.tensorboard`` shares.

Contract: a board is the real TensorBoard (``python -m tensorboard.main``)
given ``--logdir_spec name:dir,...`` (each run's log dir under its name, so
several runs show side by side) and bound to one host and port.
``serve_locally(dirs, host, port)`` runs it as a child process of this one
(local log dirs, and ``gs://``/``s3://`` ones on every backend) and yields a
``Board`` once its HTTP server answers; leaving the context stops it, so
Ctrl-C leaves nothing running. The ``tensorboard`` package is never
imported here (the controller's start stays fast); a missing one is a
``BackendUnavailable`` naming what to install. ``planned_log_dirs`` reads
the runs' log dirs from the plans that the backends supervising from this
machine (local, compose) keep in their state dirs.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from launcher.errors import BackendUnavailable, LaunchError
from launcher.plan.targets import BackendKind
from launcher.supervision.harness import StateDir

#: TensorBoard's own default port, also the port inside its container or pod.
PORT = 6006
#: How long a starting TensorBoard may take to answer HTTP.
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Board:
    """A TensorBoard being served: its URL, and whether it still runs."""

    url: str
    running: Callable[[], bool]


def log_dir_of(name: str, directory: str | None) -> str:
    """``directory``, or ``LaunchError`` when run ``name`` writes no summaries."""
    if directory is None:
        raise LaunchError(f"run {name!r} writes no TensorBoard summaries (its spec has tensorboard.enabled: false)")
    return directory


def planned_log_dirs(kind: BackendKind, names: Sequence[str]) -> dict[str, str]:
    """Each run's log dir, from its plan on this machine; ``LaunchError`` for an unknown run."""
    dirs = {}
    for name in names:
        state = StateDir.of(kind, name)
        if not state.exists():
            raise LaunchError(f"no {kind.value} cluster named {name!r}")
        dirs[name] = log_dir_of(name, state.record.read_plan().run_config.tensorboard_dir)
    return dirs


def logdir_spec(dirs: Mapping[str, str]) -> str:
    """``name:dir,...`` for ``--logdir_spec``; a dir holding a comma cannot be listed there."""
    bad = [d for d in dirs.values() if "," in d]
    if bad:
        raise LaunchError(f"TensorBoard cannot read a log dir whose path holds a comma: {bad[0]!r}")
    return ",".join(f"{name}:{directory}" for name, directory in dirs.items())


def command(dirs: Mapping[str, str], host: str, port: int, python: str = "python") -> list[str]:
    """TensorBoard's command line (an argument list) for ``dirs`` on ``host:port``."""
    return [python, "-m", "tensorboard.main", "--logdir_spec", logdir_spec(dirs), "--host", host, "--port", str(port)]


def url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def wait_until_serving(address: str, running: Callable[[], bool], what: Callable[[], str],
                       timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Return once ``address`` answers HTTP; ``LaunchError`` if the server ended or timed out first."""
    import urllib.error  # here: every backend's start imports this module, only a board needs HTTP
    import urllib.request

    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if not running():
            raise LaunchError(f"TensorBoard ended before serving: {what()}")
        try:
            with urllib.request.urlopen(address + "data/logdir", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    raise LaunchError(f"TensorBoard did not answer at {address} within {timeout:.0f}s: {what()}")


def require_tensorboard() -> None:
    if importlib.util.find_spec("tensorboard") is None:
        raise BackendUnavailable("the `tensorboard` package is missing here: `pip install tensorboard` "
                                 "(or install tfcluster with its `worker` extra)")


@contextmanager
def serve_locally(dirs: Mapping[str, str], host: str, port: int) -> Iterator[Board]:
    """TensorBoard as a child process reading ``dirs`` (see the module contract)."""
    require_tensorboard()
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            command(dirs, host, port, python=sys.executable), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            address = url(host, port)
            wait_until_serving(address, lambda: process.poll() is None, lambda: _last_line(log))
            yield Board(address, lambda: process.poll() is None)
        finally:
            _stop(process)


def _last_line(log: Any) -> str:
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
