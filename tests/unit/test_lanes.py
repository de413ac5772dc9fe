"""The suite's lanes (``helpers.lanes``): in two processes a lane runs whole in one of them, the e2e lane first;
in one process the e2e tests run last. Under CI the required groups are counted and a skip fails alike in both.
Checked on tiny pytest trees (pytester), the distributed ones with pytest-xdist in a pytest of their own."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from helpers.lanes import without_lane
from helpers.required import TREE_INI

CONFTEST = """
import pytest

pytest_plugins = ["helpers.lanes"]

def pytest_configure(config):
    from helpers import required  # here: it imports helpers.lanes, a plugin of this tree

    required.ALLOWED_SKIPS = ALLOWED_SKIPS
    required.count_groups(config)

ALLOWED_SKIPS = {}
"""


#: Each test writes its node's name, its lane's name and its process (an xdist worker's id, or "main").
RECORD = """
import os
import pytest

def ran(request, lane):
    with open(os.environ["LANES_LOG"], "a") as log:
        log.write(f"{request.node.name} {lane} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")
"""

MODULES = {
    "test_a": """
@pytest.mark.tf
def test_a1(request): ran(request, "test_a.py")

@pytest.mark.e2e
def test_e2e_in_a(request): ran(request, "e2e")

@pytest.mark.docker
@pytest.mark.tf
def test_docker_in_a(request): ran(request, "docker")

def test_a2(request): ran(request, "test_a.py")
""",
    "test_b": """
@pytest.mark.slurm
def test_slurm_in_b(request): ran(request, "slurm")

@pytest.mark.e2e
@pytest.mark.slurm
def test_e2e_and_slurm_in_b(request): ran(request, "e2e")

@pytest.mark.parametrize("n", range(3))
def test_b(request, n): ran(request, "test_b.py")

@pytest.mark.browser
def test_browser_in_b(request): ran(request, "test_b.py")

@pytest.mark.docker
def test_docker_in_b(request): ran(request, "docker")
""",
}


@pytest.fixture
def tree(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(TREE_INI)
    pytester.makepyfile(**{name: RECORD + body for name, body in MODULES.items()})
    log = tmp_path / "lanes.log"
    monkeypatch.setenv("LANES_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))  # helpers, for the subprocess
    return log


def runs(log: Path) -> list[tuple[str, str, str]]:
    return [(test, lane, process) for test, lane, process in (line.split() for line in log.read_text().splitlines())]


def test_in_one_process_the_e2e_tests_run_last_and_each_group_lane_runs_together(pytester: pytest.Pytester, tree: Path) -> None:
    pytester.runpytest_inprocess().assert_outcomes(passed=11)
    lanes = [lane for _, lane, _ in runs(tree)]
    assert lanes == ["docker", "docker", "slurm", "test_a.py", "test_a.py", "test_b.py", "test_b.py", "test_b.py",
                     "test_b.py", "e2e", "e2e"], lanes


def test_in_two_processes_each_lane_runs_whole_in_one_and_the_e2e_lane_comes_first(
        pytester: pytest.Pytester, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder")
    result.assert_outcomes(passed=11)
    processes: defaultdict[str, set[str]] = defaultdict(set)
    for _, lane, process in runs(tree):
        processes[lane].add(process)
    assert all(len(where) == 1 for where in processes.values()), dict(processes)  # pytest-xdist's loadgroup works
    assert set().union(*processes.values()) == {"gw0", "gw1"}  # and two processes ran
    first = {process: lane for _, lane, process in reversed(runs(tree))}
    assert "e2e" in first.values(), first  # one process started with the e2e lane


SKIPS = """
@pytest.mark.docker
def test_skips(request): pytest.skip("no engine here")

@pytest.mark.slurm
def test_allowed(request): pytest.skip("opt-in")

@pytest.mark.tf
@pytest.mark.e2e
def test_every_other_group(request): ran(request, "e2e")

@pytest.mark.browser
def test_browser(request): ran(request, "x")
"""


def test_in_two_processes_under_ci_the_groups_are_counted_and_a_required_skip_fails_unless_allowed(
        pytester: pytest.Pytester, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    pytester.makepyfile(test_a=RECORD + SKIPS, test_b=RECORD + "def test_plain(request): ran(request, 'test_b.py')\n")
    pytester.makeconftest(CONFTEST + "ALLOWED_SKIPS = {'test_a.py::test_allowed': 'the reason it may skip'}\n")
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-rfs")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines_random([
        "FAILED test_a.py::test_skips@docker - CI is set and test_a.py::test_skips (docker, required) skipped: no engine here*",
        "tf 1 (* s), docker 0 (* s), slurm 0 (* s), browser 1 (* s), e2e 1 (* s)",  # the skips did not run
        "skip allowed (ALLOWED_SKIPS): test_a.py::test_allowed: the reason it may skip",
        "FAILED: CI requires these groups and none of their tests ran: docker, slurm",
    ])


@pytest.mark.parametrize(("nodeid", "plain"), [
    ("tests/test_a.py::test_x@docker", "tests/test_a.py::test_x"),
    ("tests/test_a.py::test_x[user@host]", "tests/test_a.py::test_x[user@host]"),
    ("tests/test_a.py::test_x[user@host]@tests/test_a.py", "tests/test_a.py::test_x[user@host]"),
    ("tests/test_a.py::test_x", "tests/test_a.py::test_x"),
])
def test_a_node_id_without_its_lane_is_the_id_collected(nodeid: str, plain: str) -> None:
    assert without_lane(nodeid) == plain
