"""What CI installs is required there: a test that needs it fails under CI and skips elsewhere.

Contract: the test groups are the markers in ``GROUPS``; ``REQUIRED`` are those a CI run (env ``CI`` set)
must run: a test of a required group whose part is missing fails there (``unavailable``), and the run fails
when none of a required group's tests ran (``GroupCount``, which prints each group's count and test time at the end).
Under CI a test of a required group that ends skipped (``pytest.skip``, a ``skipif`` mark, ``importorskip``; in
setup or call) fails, one line naming it and its skip reason, unless ``ALLOWED_SKIPS`` lists it with the reason
(the one allow-list; the entries a run used are printed beside the groups' counts). An ``xfail`` is not a skip.
Every group is required: CI runs a real Kubernetes cluster for ``e2e`` (scripts/test.sh starts .ci/k8s.sh's in the
background; tests/helpers/k8s_start.py). A third-party module a test needs is
imported with ``require_module``; the project's own modules (``launcher``, the test helpers) are imported
plainly, never skipped: a broken import of ours is an error, not a skip.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from collections.abc import Generator
from fnmatch import fnmatchcase
from types import ModuleType

import pytest

from helpers.lanes import distributed, without_lane
from launcher.protocol.durations import for_people

#: The test groups, by marker (pyproject.toml describes each).
GROUPS = ("tf", "docker", "slurm", "browser", "e2e")
#: The groups CI installs and must run.
REQUIRED = ("tf", "docker", "slurm", "browser", "e2e")
#: How many test files the summary names, slowest first (where the suite's time went, by file).
FILES_SHOWN = 15

#: The pytest.ini of a tiny test tree (pytester) whose markers are the groups: the tests of this module and of lanes.
TREE_INI = "[pytest]\naddopts = --strict-markers -p no:cacheprovider\nmarkers =\n" + "".join(f"    {group}: {group}\n"
                                                                                        for group in GROUPS)
#: The only skips CI accepts in a required group: a node id (or an ``fnmatch`` pattern of node ids) and why it may skip.
ALLOWED_SKIPS: dict[str, str] = {
    "tests/integration/test_image.py::test_gpu_variant_builds_with_the_cuda_tensorflow":
        "opt-in: builds the multi-GB GPU image only with TFCLUSTER_TEST_GPU_IMAGE=1",
}

OWN_PACKAGES = ("launcher", "helpers", "fakes")


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def unavailable(reason: str, group: str | None = None) -> None:
    """Fail under CI (``.ci/run`` installs Docker, Slurm, Kubernetes, TensorFlow, Chromium and the host's libraries), skip elsewhere.

    ``group``: the test group whose part is missing; one not in ``REQUIRED`` skips under CI too.
    Callable from a test, a fixture or a module's top level (which skips or fails the whole module).
    """
    if in_ci() and (group is None or group in REQUIRED):
        pytest.fail(f"CI is set but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str, group: str = "tf") -> ModuleType:
    """The third-party module ``name``, imported; ``unavailable`` when it is not installed.

    Only the module itself (or its package) missing is "not installed": any other import error propagates.
    """
    if name.partition(".")[0] in OWN_PACKAGES:
        raise ValueError(f"{name} is the project's own module: import it plainly (a broken import must fail, not skip)")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise
        missing = str(exc)
    unavailable(f"{name} is not installed ({missing})", group)  # outside the handler: one line, no chained traceback
    raise AssertionError("unreachable: unavailable() raises")


def count_groups(config: pytest.Config) -> None:
    """Under CI, count the groups' tests in this run (``GroupCount``; in an xdist worker only ``RequiredSkips``: the
    controller counts); tests/conftest.py's ``pytest_configure``."""
    if in_ci():
        plugin = RequiredSkips() if distributed(config) else GroupCount()
        config.pluginmanager.register(plugin, "tfcluster-group-count")


def allowed_skip(nodeid: str) -> str | None:
    """The ``ALLOWED_SKIPS`` entry (node id or pattern) that lists ``nodeid`` (its xdist lane aside), if any."""
    nodeid = without_lane(nodeid)
    return next((entry for entry in ALLOWED_SKIPS if fnmatchcase(nodeid, entry)), None)


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped report's reason, as ``-rs`` shows it (without pytest's ``Skipped: ``)."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


class RequiredSkips:
    """A pytest plugin for the process that runs the tests: a required group's test that skips fails instead,
    unless ``ALLOWED_SKIPS`` lists it. Its report says which (``ci_skipped``, ``ci_allowed_skip``: attributes that
    travel with a report from an xdist worker to the process that counts, ``GroupCount``)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report: pytest.TestReport = yield
        required = {mark.name for mark in item.iter_markers() if mark.name in REQUIRED}
        if not (report.skipped and required) or hasattr(report, "wasxfail"):
            return report
        entry = allowed_skip(item.nodeid)
        if entry is not None:
            report.ci_allowed_skip = entry  # type: ignore[attr-defined]
            return report
        report.ci_skipped = True  # type: ignore[attr-defined]
        report.outcome = "failed"
        nodeid = without_lane(item.nodeid)
        report.longrepr = (f"CI is set and {nodeid} ({', '.join(sorted(required))}, required) skipped: "
                           f"{skip_reason(report)} (not in ALLOWED_SKIPS, tests/helpers/required.py)")
        return report


class GroupCount(RequiredSkips):
    """A pytest plugin (registered under CI by tests/conftest.py, in the process that reports: under xdist the
    controller, whose workers run ``RequiredSkips``): counts the tests of each group that ran (their body was called;
    a group is a marker of the test's report's keywords) and sums the time of each group's tests (setup, call and
    teardown, as pytest measured them: a test in two groups counts in both), prints both at the end and fails the run
    when a required group ran none. The ``ALLOWED_SKIPS`` entries used are printed at the end."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.seconds: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
        self.file_seconds: Counter[str] = Counter()
        self.missing: list[str] = []
        self.allowed_used: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        groups = [group for group in GROUPS if group in report.keywords]
        self.file_seconds[report.nodeid.split("::")[0]] += report.duration
        for group in groups:
            self.seconds[group] += report.duration
        entry = getattr(report, "ci_allowed_skip", None)
        if entry is not None:
            self.allowed_used.add(entry)
        if report.when == "call" and not report.skipped and not getattr(report, "ci_skipped", False):
            self.ran.update(groups)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if session.config.option.collectonly:
            return
        self.missing = [group for group in REQUIRED if not self.ran[group]]
        if self.missing and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if terminalreporter.config.option.collectonly:
            return
        counts = ", ".join(f"{group} {self.ran[group]} ({for_people(self.seconds[group])})"
                           + ("" if group in REQUIRED else " (not required)") for group in GROUPS)
        terminalreporter.write_sep("=", "test groups run (CI)")
        terminalreporter.write_line(counts)
        slowest = self.file_seconds.most_common(FILES_SHOWN)
        terminalreporter.write_line("slowest files: " + ", ".join(f"{path} {for_people(seconds)}" for path, seconds in slowest))
        for entry in sorted(self.allowed_used):
            terminalreporter.write_line(f"skip allowed (ALLOWED_SKIPS): {entry}: {ALLOWED_SKIPS[entry]}")
        if self.missing:
            terminalreporter.write_line(f"FAILED: CI requires these groups and none of their tests ran: {', '.join(self.missing)}",
                                        red=True, bold=True)
