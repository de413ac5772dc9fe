"""``launcher.backends.tcmalloc``: TCMalloc preloaded into local tasks where this host has it, never over a user's."""

from __future__ import annotations

from pathlib import Path

import dockerfile

from helpers.paths import REPO
from launcher.backends import tcmalloc
from launcher.backends.local.target import LocalTarget
from launcher.plan.planner import make_plan
from launcher.spec.loader import validate_data


def _library_in(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / tcmalloc.LIBRARY).write_bytes(b"")
    return directory / tcmalloc.LIBRARY


def test_the_first_library_found_is_preloaded_with_large_allocations_unreported(tmp_path: Path) -> None:
    second = _library_in(tmp_path / "lib64")
    assert tcmalloc.preload_env({}, [tmp_path / "none", second.parent, _library_in(tmp_path / "lib").parent]) == {
        "LD_PRELOAD": str(second), "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 50)}


def test_nothing_without_the_library_or_over_the_users_own_preload(tmp_path: Path) -> None:
    assert tcmalloc.preload_env({}, [tmp_path]) == {}
    found = _library_in(tmp_path / "lib").parent
    assert tcmalloc.preload_env({"LD_PRELOAD": "/opt/mine.so"}, [found]) == {}
    assert tcmalloc.preload_env({"LD_PRELOAD": ""}, [found]) == {}


def test_a_local_plan_gives_every_task_the_preload_and_the_specs_env_overrides_it(monkeypatch, tmp_path: Path) -> None:
    preload = {"LD_PRELOAD": str(tmp_path / tcmalloc.LIBRARY), **tcmalloc.QUIET}
    monkeypatch.setattr(tcmalloc, "preload_env", lambda: preload)
    spec = validate_data({"name": "m", "roles": {"chief": {}, "worker": {"replicas": 2, "env": {"LD_PRELOAD": ""}}}})
    plan = make_plan(spec, LocalTarget.preview(3))
    chief, *workers = plan.tasks
    assert {k: chief.env[k] for k in preload} == preload
    assert [w.env["LD_PRELOAD"] for w in workers] == ["", ""]
    assert plan.task_env(chief)["LD_PRELOAD"] == preload["LD_PRELOAD"]  # what the runtime starts it with


def image_env(text: str) -> dict[str, str]:
    """The ENV of a Dockerfile's final image: its last stage's over those of the stages it is built FROM
    (read by Docker's own parser, the ``dockerfile`` package); comments, RUN lines and other stages' ENV not."""
    stages: dict[str, dict[str, str]] = {}
    env: dict[str, str] = {}
    for command in dockerfile.parse_string(text):
        if command.cmd == "FROM":
            env = dict(stages.get(command.value[0], {}))
            if len(command.value) == 3 and command.value[1].upper() == "AS":
                stages[command.value[2]] = env
        elif command.cmd == "ENV":
            env.update(zip(command.value[::2], command.value[1::2], strict=True))
    return env


def test_image_env_reads_only_what_the_final_image_has() -> None:
    text = """FROM debian AS base
ENV A=1
FROM base AS build
ENV B=2
# ENV C=3
RUN echo D=4
FROM base
ENV E=5 \\
    F=6
"""
    assert image_env(text) == {"A": "1", "E": "5", "F": "6"}


def test_the_worker_image_preloads_the_same_library_with_the_same_variables() -> None:
    """The Dockerfile's ENV is the one copy of this module's values that cannot import them."""
    env = image_env((REPO / "worker_image" / "Dockerfile").read_text())
    expected = {tcmalloc.PRELOAD: tcmalloc.LIBRARY, **tcmalloc.QUIET}
    assert {name: env.get(name) for name in expected} == expected
