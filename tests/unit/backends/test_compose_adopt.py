"""``ContainerRuntime.adopt`` returns once what the container had written is in ``output``: ``debug`` reads a
task's ``stacks_on_signal`` right after adopting it, and a follower thread still catching up made it miss a fresh
one (the task then counted as one that does not dump its stacks)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from fakes.docker_engine import OneContainer
from launcher import api
from launcher.backends.compose.runtime import ContainerRuntime

WRITTEN = "starting\nTFCLUSTER_EVENT/t {\"event\": \"stacks_on_signal\"}\nepoch 1\n"


class SlowStreamContainer:
    """A running container whose followed log stream gives nothing until the engine was asked, without following,
    what the run wrote (as a stream does that is slow to catch up), then what it wrote, in small chunks."""

    def __init__(self, name: str):
        self.name, self.status = name, "running"
        self.attrs = {"State": {"ExitCode": 0, "StartedAt": "2026-01-01T00:00:00.000000000Z"}}
        self.asked, self.ended = threading.Event(), threading.Event()

    def logs(self, stream: bool, follow: bool, since: float) -> Iterator[bytes]:
        if not follow:
            self.asked.set()
            return iter([WRITTEN.encode()[:20], WRITTEN.encode()[20:]])
        return self._followed()

    def _followed(self) -> Iterator[bytes]:
        if not self.asked.wait(timeout=60):
            return
        data = WRITTEN.encode()
        for at in range(0, len(data), 5):
            yield data[at:at + 5]
        self.ended.wait(timeout=60)


def test_what_the_run_wrote_is_in_output_when_adopt_returns(tmp_path: Path) -> None:
    plan = api.plan(api.validate_data({"name": "job", "roles": {"worker": {}}}), "compose")
    task = plan.tasks[0]
    container = SlowStreamContainer(task.name)
    runtime = ContainerRuntime(client=OneContainer(container), compose=[], workdir=tmp_path)
    try:
        assert runtime.adopt(task)
        assert runtime.output(task) == WRITTEN.splitlines()
    finally:
        container.asked.set()
        container.ended.set()
        runtime.close()
