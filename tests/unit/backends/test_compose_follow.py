"""``logs -f`` on compose (``launcher.backends.compose.follow``): a task across its runs until the job ends.

The engine is a small fake kept to what Docker does: a container keeps its output across its runs (a restart
without a standby starts the same container again), each line stamped with the time the engine read it, and a
log read with ``since`` includes a line of exactly that time. A followed stream here is one whose run has ended
by the time it is read; what happens between reads is scripted in the follower's ``pause``. The real engine is
covered by ``tests/integration/test_supervision_rules_every_runtime.py`` (``logs -f`` across a restart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import docker.errors
import pytest

from launcher.backends.compose import standbys
from launcher.backends.compose.follow import follow_task

NEVER_STARTED = "0001-01-01T00:00:00Z"


def stamp(ns: int) -> str:
    return f"{datetime.fromtimestamp(ns // 10**9, UTC):%Y-%m-%dT%H:%M:%S}.{ns % 10**9:09d}Z"


class Container:
    def __init__(self, engine: Engine, name: str, ident: str):
        self.engine, self.name, self.id = engine, name, ident
        self.attrs = {"State": {"StartedAt": NEVER_STARTED}}
        self.lines: list[tuple[int, str]] = []
        self.reads: list[float | None] = []

    def run(self, at: int, *lines: str) -> None:
        """A run that started at ``at`` (ns) and wrote ``lines`` a millisecond apart, then ended."""
        self.attrs["State"]["StartedAt"] = stamp(at)
        self.lines += [(at + (i + 1) * 10**6, line) for i, line in enumerate(lines)]

    def logs(self, stream: bool, follow: bool, timestamps: bool, since: float | None) -> Iterator[bytes]:
        assert stream and follow and timestamps
        self.reads.append(since)
        if self.engine.containers.get(self.name) is not self and self not in self.engine.renamed:
            raise docker.errors.NotFound(f"No such container: {self.id}")
        data = "".join(f"{stamp(ns)} {line}\n" for ns, line in self.lines if since is None or ns / 10**9 >= since)
        raw = data.encode()
        return iter([raw[at:at + 7] for at in range(0, len(raw), 7)])  # lines split anywhere, as streams do


class Engine:
    """``client.containers.get`` over containers by name (a rename moves the name)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Container] = {}
        self.renamed: list[Container] = []
        self.containers = self

    def get(self, name: str) -> Container:
        if name not in self.by_name:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.by_name[name]

    def add(self, name: str, ident: str) -> Container:
        self.by_name[name] = Container(self, name, ident)
        return self.by_name[name]


def scripted(steps: list[Callable[[], None]]) -> tuple[Callable[[float], None], Callable[[], bool]]:
    """A ``pause`` taking the next step at each call, and an ``over`` true once every step was taken."""
    left = list(steps)

    def pause(seconds: float) -> None:
        assert left, "the follower still waits after the job ended"
        left.pop(0)()

    return pause, lambda: not left


S = 10**9  # a second in ns: runs at 100 s, 200 s, ... of the epoch


def test_a_restarted_container_shows_only_its_new_lines_every_run_between_two_looks_included(tmp_path: Path) -> None:
    engine = Engine()
    task = engine.add("job-worker-0", "c1")
    task.run(100 * S, "run 1 a", "run 1 b")
    pause, over = scripted([
        lambda: None,  # the supervisor has not restarted it yet
        lambda: task.run(200 * S, "run 2"),
        lambda: (task.run(300 * S, "run 3"), task.run(400 * S, "run 4")),  # two runs while nobody looked
        lambda: None,
    ])
    assert list(follow_task(engine, tmp_path, task, over, pause)) == ["run 1 a", "run 1 b", "run 2", "run 3",
                                                                      "run 4"]
    # each read again from just after the last line shown (that line's time is included by Docker's ``since``)
    assert task.reads == [None, pytest.approx(100.002 + 1e-6, abs=1e-7), pytest.approx(200.001 + 1e-6, abs=1e-7)]


def test_a_standby_made_the_task_is_followed_from_its_start_after_what_the_ended_container_wrote(
        tmp_path: Path) -> None:
    engine = Engine()
    ended = standbys.ended_log(tmp_path, "job-worker-0")
    ended.parent.mkdir()
    ended.write_text("retired run\n")
    task = engine.add("job-worker-0", "c1")
    task.run(100 * S, "run 1")

    def call_standby() -> None:  # the ended container renamed out of the way (then retired), the standby renamed
        engine.renamed.append(engine.by_name.pop("job-worker-0"))
        standby = engine.add("job-worker-0", "c2")
        standby.run(50 * S, "ready", "called")

    pause, over = scripted([call_standby, lambda: None])
    assert list(follow_task(engine, tmp_path, task, over, pause)) == ["retired run", "run 1", "ready", "called"]


def test_a_container_not_started_yet_is_followed_once_it_runs_and_the_follow_ends_with_the_job(
        tmp_path: Path) -> None:
    engine = Engine()
    task = engine.add("job-worker-0", "c1")
    pause, over = scripted([lambda: None, lambda: task.run(100 * S, "run 1"), lambda: None])
    assert list(follow_task(engine, tmp_path, task, over, pause)) == ["run 1"]


def test_a_job_that_ended_while_the_task_was_gone_ends_the_follow(tmp_path: Path) -> None:
    engine = Engine()
    task = engine.add("job-worker-0", "c1")
    task.run(100 * S, "run 1")
    pause, over = scripted([lambda: engine.by_name.clear()])  # removed (down) as the job ended
    assert list(follow_task(engine, tmp_path, task, over, pause)) == ["run 1"]
