"""The run names of the tests on a shared engine (``helpers.run_names.run_name``: Docker, Slurm, the real cluster's
namespace): one suffix for a whole session, another for the next, so that two sessions never name (and so never take
down) each other's runs."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.k8s_e2e import demo_plan
from helpers.paths import REPO
from helpers.run_names import SESSION_SUFFIX, run_name
from launcher.plan import naming


def session_names() -> list[str]:
    """The names another session (a new interpreter) gives two runs."""
    shown = subprocess.run(
        [sys.executable, "-c", "from helpers.run_names import run_name; print(run_name('e2e-demo'), run_name('ep-run'))"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])},
        capture_output=True, text=True, check=True, timeout=120,
    )
    return shown.stdout.split()


def test_a_session_names_every_run_with_its_one_suffix_and_the_next_session_with_another() -> None:
    assert run_name("e2e-demo") == run_name("e2e-demo") == f"e2e-demo-{SESSION_SUFFIX}"
    assert run_name("ep-run") == f"ep-run-{SESSION_SUFFIX}"
    first, second = session_names(), session_names()
    assert first != second
    for names in (first, second):
        demo, run = names
        suffix = demo.removeprefix("e2e-demo-")
        assert run == f"ep-run-{suffix}" and suffix != SESSION_SUFFIX, names


def test_a_suffixed_name_is_still_a_valid_run_name() -> None:
    plan = demo_plan(run_name("e2e-board-a"))
    assert not naming.name_problems(plan.spec), naming.name_problems(plan.spec)
