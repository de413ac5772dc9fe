"""Required means required (``helpers.required``): under CI a missing part fails its test, and a run in which a
required group ran no test fails; elsewhere the same tests skip. Checked on tiny pytest trees (pytester)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from helpers import required
from helpers.paths import REPO
from helpers.required import TREE_INI

CONFTEST = """
from helpers.required import count_groups

def pytest_configure(config):
    count_groups(config)
"""



def tree(pytester: pytest.Pytester, body: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(TREE_INI)
    pytester.makepyfile(test_groups="import pytest\nfrom helpers.required import unavailable\n\n" + body)


EVERY_GROUP = """
@pytest.mark.tf
def test_tf(): pass

@pytest.mark.docker
@pytest.mark.tf
def test_docker_and_tf(): pass

@pytest.mark.slurm
def test_slurm(): pass

@pytest.mark.e2e
def test_e2e(): pass
@pytest.mark.browser
def test_browser(): pass

def test_plain(): pass
"""


def test_under_ci_each_group_is_counted_and_a_run_of_every_required_group_passes(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    tree(pytester, EVERY_GROUP)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*test groups run (CI)*", "tf 2 (* s), docker 1 (* s), slurm 1 (* s), browser 1 (* s), e2e 1 (* s)",
                                 "slowest files: test_*.py * s"])  # where the time went, by file


def test_under_ci_a_required_group_that_ran_none_fails_the_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    tree(pytester, EVERY_GROUP)
    result = pytester.runpytest("-m", "not slurm")  # deselected: its tests did not run
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["tf 2 (* s), docker 1 (* s), slurm 0 (0 s), browser 1 (* s), e2e 1 (* s)",
                                 "FAILED: CI requires these groups and none of their tests ran: slurm"])


def test_each_groups_time_is_the_sum_of_its_tests_phases_a_test_in_two_groups_counting_in_both() -> None:
    count = required.GroupCount()
    marks = {"a": {"tf": 1}, "b": {"tf": 1, "docker": 1, "parametrize": 1}, "c": {}}
    for nodeid, when, seconds in (("a", "setup", 1.5), ("a", "call", 60.0), ("a", "teardown", 0.5),
                                  ("b", "setup", 30.0), ("b", "call", 90.0), ("c", "call", 1000.0)):
        count.pytest_runtest_logreport(pytest.TestReport(nodeid, ("f", 1, nodeid), marks[nodeid], "passed", None, when, [],
                                                         duration=seconds))
    assert count.seconds == {"tf": 182.0, "docker": 120.0, "slurm": 0.0, "browser": 0.0, "e2e": 0.0}
    assert count.ran == {"tf": 2, "docker": 1}


def test_a_skipped_test_did_not_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    tree(pytester, EVERY_GROUP.replace("def test_slurm(): pass", "def test_slurm(): pytest.skip('no cluster')"))
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*none of their tests ran: slurm"])


def test_without_ci_nothing_is_counted_or_required(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    tree(pytester, "def test_plain(): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert "test groups run" not in result.stdout.str()


MISSING_PARTS = """
@pytest.mark.docker
def test_docker():
    unavailable("Docker is unavailable: no socket", "docker")

@pytest.mark.e2e
def test_e2e():
    unavailable("needs a real cluster", "e2e")
"""


def test_a_missing_part_fails_under_ci_unless_its_group_is_not_required(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(required, "REQUIRED", ("tf", "docker", "slurm"))  # a group CI does not require (none today)
    tree(pytester, MISSING_PARTS)
    result = pytester.runpytest_inprocess("-rfs")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["FAILED test_groups.py::test_docker - Failed: CI is set but Docker is unavailable: no socket",
                                 "SKIPPED * needs a real cluster"])


def test_under_ci_a_missing_cluster_fails_the_e2e_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    tree(pytester, MISSING_PARTS)
    result = pytester.runpytest("-rf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["FAILED test_groups.py::test_e2e - Failed: CI is set but needs a real cluster"])


def test_a_missing_part_skips_elsewhere(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    tree(pytester, MISSING_PARTS)
    pytester.runpytest().assert_outcomes(skipped=2)


def test_a_module_that_is_not_installed_fails_its_module_under_ci_and_skips_it_elsewhere(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    body = 'from helpers.required import require_module\nrequire_module("no_such_module_anywhere")\n\ndef test_it(): pass\n'
    pytester.makeconftest(CONFTEST)
    pytester.makeini(TREE_INI)
    pytester.makepyfile(test_module=body)
    monkeypatch.delenv("CI", raising=False)
    pytester.runpytest().assert_outcomes(skipped=1)
    monkeypatch.setenv("CI", "1")
    result = pytester.runpytest()
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*CI is set but no_such_module_anywhere is not installed*"])


def test_the_projects_own_modules_are_never_import_skipped() -> None:
    with pytest.raises(ValueError, match="the project's own module"):
        required.require_module("launcher.examples.mnist")


def test_a_broken_dependency_of_an_installed_module_is_an_error_not_a_skip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "installed_but_broken"
    package.mkdir()
    (package / "__init__.py").write_text("import a_dependency_that_is_missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(ModuleNotFoundError, match="a_dependency_that_is_missing"):
        required.require_module("installed_but_broken")


def test_every_group_is_a_declared_marker_and_a_misspelled_marker_is_an_error() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert set(required.GROUPS) <= {marker.partition(":")[0] for marker in options["markers"]}
    assert set(required.REQUIRED) <= set(required.GROUPS)
    assert "--strict-markers" in options["addopts"]


def test_the_development_page_lists_every_marker() -> None:
    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    [passage] = [line for line in (REPO / "docs" / "development.md").read_text().splitlines() if line.startswith("Markers (")]
    assert [marker.partition(":")[0] for marker in markers] == re.findall(r"`(\w+)` \(", passage)


SKIPS = """
@pytest.fixture
def needs_a_module():
    pytest.importorskip("no_such_module_anywhere")

@pytest.mark.docker
def test_skips_in_its_body(): pytest.skip("no engine here")

@pytest.mark.slurm
@pytest.mark.skipif(True, reason="opt-in only")
def test_skipif(): pass

@pytest.mark.tf
def test_skips_in_setup(needs_a_module): pass

@pytest.mark.browser
@pytest.mark.xfail(reason="a known bug", strict=True)
def test_xfail(): assert False

def test_plain_skip(): pytest.skip("not in a group")

@pytest.mark.tf
@pytest.mark.docker
@pytest.mark.slurm
@pytest.mark.browser
@pytest.mark.e2e
def test_every_group(): pass
"""


def test_under_ci_a_required_groups_skip_fails_naming_the_test_and_its_reason(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(required, "ALLOWED_SKIPS", {})
    tree(pytester, SKIPS)
    result = pytester.runpytest_inprocess("-rfEs")
    result.assert_outcomes(passed=1, failed=1, errors=2, skipped=1, xfailed=1)  # a skip in setup: an error
    result.stdout.fnmatch_lines_random([
        "FAILED test_groups.py::test_skips_in_its_body - CI is set and test_groups.py::test_skips_in_its_body (docker,"
        " required) skipped: no engine here (not in ALLOWED_SKIPS, tests/helpers/required.py)",
        "ERROR test_groups.py::test_skipif - CI is set and test_groups.py::test_skipif (slurm, required) skipped: opt-in only *",
        "ERROR test_groups.py::test_skips_in_setup - CI is set and * (tf, required) skipped: could not import"
        " 'no_such_module_anywhere'*",
        "SKIPPED * not in a group",
    ])
    result.stdout.fnmatch_lines(["tf 1 (* s), docker 1 (* s), slurm 1 (* s), browser 1 (* s), e2e 1 (* s)"])  # the failed skips did not run


def test_under_ci_a_listed_skip_passes_and_the_log_prints_its_entry(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(required, "ALLOWED_SKIPS", {"test_groups.py::test_skip*": "the reason it may skip",
                                                    "test_groups.py::test_none_such": "unused: not printed"})
    tree(pytester, SKIPS.replace("def test_skips_in_setup", "def test_skipsetup"))
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test groups run (CI)*", "*e2e 1 (* s)",
                                 "skip allowed (ALLOWED_SKIPS): test_groups.py::test_skip*: the reason it may skip"])
    assert "unused" not in result.stdout.str()


def test_without_ci_a_required_groups_skip_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    tree(pytester, SKIPS)
    pytester.runpytest_inprocess().assert_outcomes(passed=1, skipped=4, xfailed=1)


@pytest.mark.parametrize("entry", required.ALLOWED_SKIPS)
def test_each_allowed_skip_names_a_test_of_this_suite(entry: str) -> None:
    path, _, name = entry.partition("::")
    assert (REPO / path).is_file() and f"def {name}(" in (REPO / path).read_text(), entry
