"""Interleave several blocking line streams (one per task) into one, as lines arrive.

Contract: ``interleave({label: open_stream})`` starts one daemon thread per
stream, yields ``"<label> | <line>"`` in arrival order and ends when every
stream has ended. ``open_stream`` is called in its thread, so a slow
connect does not hold up the others.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping


def interleave(streams: Mapping[str, Callable[[], Iterable[str]]]) -> Iterator[str]:
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def pump(label: str, open_stream: Callable[[], Iterable[str]]) -> None:
        try:
            for line in open_stream():
                lines.put(f"{label} | {line}")
        finally:
            lines.put(None)

    for label, open_stream in streams.items():
        threading.Thread(target=pump, args=(label, open_stream), daemon=True).start()
    open_streams = len(streams)
    while open_streams:
        line = lines.get()
        if line is None:
            open_streams -= 1
        else:
            yield line
