"""Task output as text lines, however it arrives: byte chunks, a growing file, several streams at once.

Contract: ``iter_lines(chunks)`` splits a stream of byte chunks (Docker and
Kubernetes log streams split lines anywhere) into lines, the last partial
line included; ``LineReader(path).read(final)`` returns the complete lines
appended to a file since the previous read (the partial last one only when
``final``); ``interleave({label: open_stream})`` merges blocking line
streams as lines arrive, as ``"<label> | <line>"``, one daemon thread per
stream (``open_stream`` is called in its thread, so a slow connect does not
hold up the others), and ends when every stream ended. Undecodable bytes
are replaced, never raised.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path


def _split(pending: bytes) -> tuple[list[str], bytes]:
    *lines, rest = pending.split(b"\n")
    return [line.decode("utf-8", "replace") for line in lines], rest


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    pending = b""
    for chunk in chunks:
        lines, pending = _split(pending + chunk)
        yield from lines
    if pending:
        yield pending.decode("utf-8", "replace")


class LineReader:
    """Complete lines appended to a file since the last read (the last partial line only when ``final``)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self, final: bool) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        lines, self.partial = _split(self.partial + chunk)
        if final and self.partial:
            lines, self.partial = [*lines, self.partial.decode("utf-8", "replace")], b""
        return lines


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
