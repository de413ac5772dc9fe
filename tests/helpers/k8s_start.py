"""The real Kubernetes test cluster for the e2e tests: given (TFCLUSTER_E2E_KUBECONFIG), or started in the background.

Contract: ``scripts/test.sh`` (under CI, or with TFCLUSTER_K8S_SETUP=1) starts ``.ci/k8s.sh`` in the background and
exports ``TFCLUSTER_K8S_START``, the directory where that start writes ``pid`` (its process), ``k8s.log`` (its
standard error), ``exports`` (``.ci/k8s.sh``'s standard output: ``export NAME=value`` lines) and, once it ended,
``status`` (its exit status). ``await_start`` waits for it, bounded, and never raises: the exports, or one line
saying why there are none, naming the log. ``environment`` is what the e2e tests then see: TFCLUSTER_E2E_KUBECONFIG
(the one variable they read the cluster from) from KUBECONFIG, and TFCLUSTER_REGISTRY. Without a background start
the developer's TFCLUSTER_E2E_KUBECONFIG is used as it is, and without either the e2e tests are ``unavailable``.
A pytest plugin (tests/conftest.py loads it): the first e2e test (``helpers.lanes`` orders them) waits outside its
timeout, and each gets the cluster (``_e2e_cluster``); ``shared_claim`` is the session's ``helpers.k8s_e2e.SharedClaim``.
"""

from __future__ import annotations

import functools
import os
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.required import unavailable

if TYPE_CHECKING:
    from helpers.k8s_e2e import SharedClaim

#: How long the first e2e test waits for the background start. In two processes its lane comes first, so the wait
#: starts with pytest (the rest of the run goes on in the other process); a cold build beside the set-up and a start
#: fit in it (.ci/k8s-background.sh's own bounds are longer; a start later than this fails the e2e tests, one line each).
WAIT_SECONDS = 50 * 60
#: Each e2e test's pytest-timeout (``pytest_collection_modifyitems`` marks them; the global ``timeout`` of pyproject.toml
#: is for the rest): the one budget. A real run's own deadline and one wait of ``helpers.k8s_e2e`` (``RUN_SECONDS``) fit
#: in it, and every such wait ends ``MARGIN_SECONDS`` before it (``time_left``), so its explanation fails the test first.
TEST_SECONDS = 30 * 60
RUN_SECONDS = 20 * 60
MARGIN_SECONDS = 60
START_ENV = "TFCLUSTER_K8S_START"
KUBECONFIG_ENV = "TFCLUSTER_E2E_KUBECONFIG"


class Started:
    """The outcome of a background start: ``exports`` (name -> value) or ``problem`` (one line)."""

    def __init__(self, exports: dict[str, str] | None = None, problem: str | None = None) -> None:
        self.exports = exports or {}
        self.problem = problem


def read_exports(text: str) -> dict[str, str]:
    """``export NAME=value`` lines (values as the shell quotes them) as a dict; other lines are ignored."""
    exports = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            exports[name] = value
    return exports


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def wait_for_start(directory: Path, timeout: float = WAIT_SECONDS, clock: Callable[[], float] = time.monotonic,
                   pause: Callable[[float], None] = time.sleep) -> Started:
    """Wait until the start in ``directory`` wrote its status (or its process is gone, or ``timeout`` passed)."""
    log = directory / "k8s.log"
    ends = clock() + timeout
    status = directory / "status"
    while not status.exists():
        if not _alive(directory / "pid") and not status.exists():
            return Started(problem=f"the Kubernetes test cluster's start (.ci/k8s.sh) ended without a status (log: {log})")
        if clock() >= ends:
            return Started(problem=f"the Kubernetes test cluster's start (.ci/k8s.sh) did not end within {timeout / 60:.0f} min "
                                   f"(log: {log})")
        pause(2)
    code = status.read_text().strip()
    if code != "0":
        lines = [line for line in _read(log).splitlines() if line.strip()]
        why = lines[-1].strip() if lines else "no output"
        return Started(problem=f"the Kubernetes test cluster did not start (.ci/k8s.sh exit {code}: {why}; log: {log})")
    exports = read_exports(_read(directory / "exports"))
    if "KUBECONFIG" not in exports:
        return Started(problem=f"the Kubernetes test cluster's start printed no KUBECONFIG (log: {log})")
    return Started(exports)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@functools.cache
def await_start() -> Started | None:
    """The background start of this run (waited for once), or None when scripts/test.sh started none."""
    directory = os.environ.get(START_ENV)
    return wait_for_start(Path(directory)) if directory else None


def environment(started: Started) -> dict[str, str]:
    """What the e2e tests see of a started cluster: its launcher kubeconfig and the registry its node pulls from."""
    env = {KUBECONFIG_ENV: started.exports["KUBECONFIG"]}
    if "TFCLUSTER_REGISTRY" in started.exports:
        env["TFCLUSTER_REGISTRY"] = started.exports["TFCLUSTER_REGISTRY"]
    return env


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each e2e test gets its budget, ``TEST_SECONDS`` (a timeout of its own wins). When they run: ``helpers.lanes``."""
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.timeout(TEST_SECONDS))


class _Budget:
    """When the running e2e test's waits must have ended (monotonic clock), or None outside an e2e test."""

    ends: float | None = None


def time_left(timeout: float, clock: Callable[[], float] = time.monotonic) -> float:
    """``timeout``, cut to what is left of the running e2e test's budget less ``MARGIN_SECONDS`` (never below 0)."""
    if _Budget.ends is None:
        return timeout
    return max(min(timeout, _Budget.ends - clock()), 0.0)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Before an e2e test, outside its timeout (pytest-timeout's timer starts inside this wrapper), wait once for the
    background start; ``_e2e_cluster`` reports its outcome."""
    start = os.environ.get(START_ENV)
    if start and item.get_closest_marker("e2e"):
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and not (Path(start) / "status").exists():
            reporter.write_line(f"waiting for the Kubernetes test cluster's start (log: {start}/k8s.log)")
        await_start()
    _Budget.ends = time.monotonic() + TEST_SECONDS - MARGIN_SECONDS if item.get_closest_marker("e2e") else None
    try:
        return (yield)
    finally:
        _Budget.ends = None


@pytest.fixture(autouse=True)
def _e2e_cluster(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """An e2e test gets the real cluster: the one scripts/test.sh started (its kubeconfig as TFCLUSTER_E2E_KUBECONFIG,
    its registry as TFCLUSTER_REGISTRY), else the developer's TFCLUSTER_E2E_KUBECONFIG; a failed start fails it
    (one line naming the start's log), no cluster at all is ``unavailable`` (fails under CI)."""
    if request.node.get_closest_marker("e2e") is None:
        return
    started = await_start()
    if started is not None:
        if started.problem:
            pytest.fail(started.problem, pytrace=False)
        for name, value in environment(started).items():
            monkeypatch.setenv(name, value)
    if not os.environ.get(KUBECONFIG_ENV):
        unavailable(f"needs a real cluster: set {KUBECONFIG_ENV} (or run scripts/test.sh with TFCLUSTER_K8S_SETUP=1)", "e2e")


@pytest.fixture(scope="session")
def shared_claim() -> Iterator[SharedClaim]:
    """The session's one claim for runs of tiny programs (``helpers.k8s_e2e.SharedClaim``; made when first named,
    at test time, once ``_e2e_cluster`` gave the cluster), deleted after the session."""
    from helpers.k8s_e2e import SharedClaim  # noqa: F811 - it imports this module: at test time

    claim = SharedClaim()
    yield claim
    claim.delete()
