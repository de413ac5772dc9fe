"""``logs -f`` on compose: a task's output across its runs, as the local backend follows a task's log file.

Contract: ``follow_task(client, root, first, over)`` yields what ``logs`` shows of the task whose container is
``first`` (the output of the containers its restarts retired, ``standbys.ended_log``, then ``first``'s), following
``first`` while it runs; then, whenever the task's name is a container not followed yet (a standby the supervisor
made the task, a container compose created again) or the same container running again (a restart without a
standby), that container's output not shown yet, followed as it runs. Between runs it looks
``POLL_SECONDS`` apart. It returns once ``over()`` says the job has ended (or is gone) and nothing new is left.
No line is shown twice: a container is read again from just after the last line shown of it (Docker's log
timestamps), so runs of it that began and ended between two looks are shown too. ``logs`` without ``-f`` is not
this module's: it shows what is there once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from launcher.backends.compose import standbys
from launcher.backends.compose.runtime import docker_time
from launcher.backends.lines import file_chunks, iter_lines

#: Pause between looks for the task's next run while none is left to follow and the job goes on.
POLL_SECONDS = 0.2
#: After the last line shown (unix seconds): Docker's ``since`` includes a line of exactly that time, and a float
#: keeps a date's seconds to about a quarter of a microsecond; a restart takes far longer than this.
AFTER_SHOWN = 1e-6


def follow_task(client: Any, root: Path, first: Any, over: Callable[[], bool],
                pause: Callable[[float], None] = time.sleep) -> Iterator[str]:
    import docker.errors

    task = first.name
    ended = standbys.ended_log(root, task)
    if ended.is_file():
        yield from iter_lines(file_chunks(ended))
    #: per container id: the run last followed (its StartedAt) and the Docker time of the last line shown of it
    runs: dict[str, str] = {}
    shown: dict[str, float] = {}
    container: Any = first
    while True:
        runs[container.id] = container.attrs["State"]["StartedAt"]
        since = shown[container.id] + AFTER_SHOWN if container.id in shown else None
        try:
            for stamp, line in _stamped(container.logs(stream=True, follow=True, timestamps=True, since=since)):
                if stamp is not None:
                    shown[container.id] = stamp
                yield line
        except docker.errors.NotFound:
            pass  # removed meanwhile (a restart retired it): the task's name is looked up again
        while True:
            done = over()  # asked before looking: a run that began before the job ended is seen by this look
            container = standbys.find(client, task)
            if container is not None and runs.get(container.id) != container.attrs["State"]["StartedAt"]:
                break
            if done:
                return
            pause(POLL_SECONDS)


def _stamped(chunks: Iterable[bytes]) -> Iterator[tuple[float | None, str]]:
    """The lines of a log stream Docker timestamped (``timestamps=True``), each with its time (None when a line
    does not start with one), without the timestamp."""
    for line in iter_lines(chunks):
        stamp, _, text = line.partition(" ")
        try:
            yield docker_time(stamp), text
        except ValueError:
            yield None, line
