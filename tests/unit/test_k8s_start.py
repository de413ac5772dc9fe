"""The e2e tests' real cluster (``helpers.k8s_start``): scripts/test.sh's background start waited for, bounded, its
failure one line naming its log; the e2e tests run last. The waits on stand-in start directories; the plugin on
tiny pytest trees (pytester)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import k8s_start

EXPORTS = "export TFCLUSTER_REGISTRY=127.0.0.1:5000\nexport KUBECONFIG='/var/lib/a b/launcher.kubeconfig'\n"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses = 0

    def pause(self, seconds: float) -> None:
        self.now += seconds
        self.pauses += 1


def start_dir(tmp_path: Path, status: str | None = None, log: str = "", exports: str = "", pid: int = os.getpid()) -> Path:
    (tmp_path / "pid").write_text(f"{pid}\n")
    (tmp_path / "k8s.log").write_text(log)
    (tmp_path / "exports").write_text(exports)
    if status is not None:
        (tmp_path / "status").write_text(f"{status}\n")
    return tmp_path


def wait(directory: Path, clock: Clock, timeout: float = 60) -> k8s_start.Started:
    return k8s_start.wait_for_start(directory, timeout, clock=lambda: clock.now, pause=clock.pause)


def test_a_started_cluster_gives_its_kubeconfig_as_the_e2e_tests_variable_and_its_registry(tmp_path: Path) -> None:
    started = wait(start_dir(tmp_path, "0", exports=EXPORTS), Clock())
    assert started.problem is None
    assert k8s_start.environment(started) == {"TFCLUSTER_E2E_KUBECONFIG": "/var/lib/a b/launcher.kubeconfig",
                                              "TFCLUSTER_REGISTRY": "127.0.0.1:5000"}


def test_a_failed_start_is_one_line_with_the_logs_last_line_and_its_path(tmp_path: Path) -> None:
    log = "k8s.sh: building kubelet\nsome go error\nk8s.sh: building kube-apiserver failed\n\n"
    started = wait(start_dir(tmp_path, "1", log=log), Clock())
    assert started.problem == (f"the Kubernetes test cluster did not start (.ci/k8s.sh exit 1: k8s.sh: building kube-apiserver "
                               f"failed; log: {tmp_path / 'k8s.log'})")


def test_a_start_that_printed_no_kubeconfig_is_a_problem(tmp_path: Path) -> None:
    started = wait(start_dir(tmp_path, "0", exports="export TFCLUSTER_REGISTRY=127.0.0.1:5000\n"), Clock())
    assert started.problem is not None and "printed no KUBECONFIG" in started.problem


def test_a_start_still_running_is_waited_for_until_the_bound(tmp_path: Path) -> None:
    clock = Clock()
    started = wait(start_dir(tmp_path), clock, timeout=60)
    assert clock.now >= 60 and clock.pauses <= 31
    assert started.problem == f"the Kubernetes test cluster's start (.ci/k8s.sh) did not end within 1 min (log: {tmp_path / 'k8s.log'})"


def test_a_start_whose_process_is_gone_without_a_status_is_a_problem_at_once(tmp_path: Path) -> None:
    clock = Clock()
    started = wait(start_dir(tmp_path, pid=2**22 + 1), clock)  # above pid_max's largest default: no such process
    assert clock.pauses == 0
    assert started.problem is not None and "ended without a status" in started.problem


PLUGIN_TREE = """
import pytest

@pytest.mark.e2e
def test_first_on_a_cluster():
    import os
    print("kubeconfig", os.environ.get("TFCLUSTER_E2E_KUBECONFIG"))

def test_plain():
    pass
"""


@pytest.fixture
def tree(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    pytester.makeconftest('pytest_plugins = ["helpers.lanes", "helpers.k8s_start"]\n')
    pytester.makeini("[pytest]\naddopts = --strict-markers -p no:cacheprovider\nmarkers =\n    e2e: e\n")
    pytester.makepyfile(test_tree=PLUGIN_TREE)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(k8s_start.KUBECONFIG_ENV, raising=False)
    k8s_start.await_start.cache_clear()
    yield pytester
    k8s_start.await_start.cache_clear()


def test_the_e2e_tests_run_last_and_see_the_started_clusters_kubeconfig(tree: pytest.Pytester, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8s_start.START_ENV, str(start_dir(tmp_path, "0", exports=EXPORTS)))
    result = tree.runpytest_inprocess("-v", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*::test_plain PASSED", "*::test_first_on_a_cluster kubeconfig /var/lib/a b/launcher.kubeconfig"])


def test_a_failed_start_fails_the_e2e_tests_with_one_line_naming_the_log(tree: pytest.Pytester, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(k8s_start.START_ENV, str(start_dir(tmp_path, "1", log="k8s.sh: node tfcluster-node (Ready) did not come up\n")))
    result = tree.runpytest_inprocess()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_first_on_a_cluster*",
                                 "the Kubernetes test cluster did not start (.ci/k8s.sh exit 1: k8s.sh: node tfcluster-node (Ready) did not "
                                 f"come up; log: {tmp_path}/k8s.log)"])
    assert "Traceback" not in result.stdout.str()


def test_without_a_cluster_the_e2e_tests_skip(tree: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(k8s_start.START_ENV, raising=False)
    tree.runpytest_inprocess().assert_outcomes(passed=1, skipped=1)


BUDGET_TREE = """
import pytest
from helpers.k8s_start import time_left

@pytest.mark.e2e
def test_on_a_cluster(request):
    print("e2e timeout", request.node.get_closest_marker("timeout").args[0], "left", time_left(10**6))

def test_plain(request):
    print("plain timeout", request.node.get_closest_marker("timeout"), "left", time_left(5))
"""


def test_an_e2e_test_has_the_one_budget_and_its_waits_end_before_it(tree: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert k8s_start.RUN_SECONDS + k8s_start.MARGIN_SECONDS < k8s_start.TEST_SECONDS  # a run and a wait fit in a test
    monkeypatch.setenv(k8s_start.KUBECONFIG_ENV, "/nonexistent/kubeconfig")  # a cluster is given: the test runs
    monkeypatch.delenv(k8s_start.START_ENV, raising=False)
    tree.makepyfile(test_tree=BUDGET_TREE)
    result = tree.runpytest_inprocess("-s")
    result.assert_outcomes(passed=2)
    [(timeout, left)] = re.findall(r"e2e timeout (\S+) left (\S+)", result.stdout.str())
    assert int(timeout) == k8s_start.TEST_SECONDS
    assert k8s_start.TEST_SECONDS - k8s_start.MARGIN_SECONDS - 60 < float(left) <= k8s_start.TEST_SECONDS - k8s_start.MARGIN_SECONDS
    result.stdout.fnmatch_lines(["*plain timeout None left 5*"])  # pyproject.toml's global timeout; no budget


def test_a_wait_of_the_e2e_helpers_ends_with_its_explanation_when_the_tests_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers import k8s_e2e

    monkeypatch.setattr(k8s_start._Budget, "ends", 0.0)  # the monotonic clock is past it
    looked: list[int] = []
    with pytest.raises(pytest.fail.Exception, match="timed out after 0 s waiting for a running pod"):
        k8s_e2e.until("a running pod", lambda: looked.append(1), timeout=k8s_e2e.TIMEOUT_SECONDS)
    assert k8s_start.time_left(k8s_e2e.TIMEOUT_SECONDS) == 0.0
