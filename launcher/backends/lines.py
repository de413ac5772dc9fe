"""Task output as text lines, however it arrives: byte chunks, a growing file, several streams at once.

Contract: ``LineSplitter`` is the one place a task's output is cut into lines: ``feed(chunk)`` returns the lines a
chunk completed (split at ``\\n``; Docker and Kubernetes log streams split lines anywhere), ``end()`` the partial
last one. Its time is linear in what it is fed and it holds at most ``2 * MAX_LINE_BYTES`` of a line whatever a task
prints: a line longer than ``MAX_LINE_BYTES`` keeps its first ``MAX_LINE_BYTES`` (cut at a character's start) and
``CUT_MARK``, and, when the rest held carriage returns, a carriage return and what followed the last of them
(bounded alike): what a terminal shows last, where an event written after a progress bar is read
(``launcher.protocol.events``); the rest of it is dropped until its newline.
``iter_lines(chunks)`` splits a stream of byte chunks, the last partial line included; ``LineReader(path).read(final)``
returns the complete lines appended to a file since the previous read, at most ``BATCH_LINES`` of them, of about
``BATCH_BYTES`` characters (at most one chunk's more; the rest at the next reads; the partial last one only when
``final`` and the file is read to its end, the end the first ``final`` read found: so a read returns [] only at
the end of what was written);
``LineQueue`` hands the lines a reader thread follows (a Docker or pod log stream) to the supervisor, holding at
most ``BATCH_LINES`` lines of ``BATCH_BYTES`` characters (and one line more): its reader waits while it is full
(backpressure on the stream, nothing dropped). So however much a task prints between two polls, one read hands
over a bounded batch. ``file_chunks(path)`` a file's bytes in such chunks; ``interleave({label:
open_stream})`` merges blocking line streams as lines arrive, as ``"<label> | <line>"``, one daemon thread per
stream (``open_stream`` is called in its thread, so a slow connect does not hold up the others), holding at most
``BATCH_LINES`` lines its reader has not taken (a stream's thread waits meanwhile), and ends when every stream
ended. Undecodable bytes are replaced, never raised.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

#: The most of one output line kept (bytes; and as much of its last carriage-return segment): more is cut.
MAX_LINE_BYTES = 16 * 1024
#: What ends a line cut at ``MAX_LINE_BYTES``.
CUT_MARK = f" [tfcluster: line cut at {MAX_LINE_BYTES} bytes]"
#: How much of a file is read at a time.
READ_BYTES = 64 * 1024
#: The most lines one read of a task's output hands over (``LineReader.read``, ``LineQueue.take``).
BATCH_LINES = 10_000
#: About the most characters of lines one read hands over (``LineReader``), the most a ``LineQueue`` holds.
BATCH_BYTES = 1024 * 1024


def _whole(data: bytearray, cut: bool) -> str:
    """``data`` as text; when ``cut``, without the character the cut split (a UTF-8 sequence left incomplete)."""
    end = len(data)
    if cut and data:
        lead = end - 1
        while lead > 0 and end - lead < 4 and data[lead] & 0xC0 == 0x80:
            lead -= 1  # back over continuation bytes to the sequence's first byte
        first = data[lead]
        size = 2 if first & 0xE0 == 0xC0 else 3 if first & 0xF0 == 0xE0 else 4 if first & 0xF8 == 0xF0 else 1
        if end - lead < size:
            end = lead
    return bytes(data[:end]).decode("utf-8", "replace")


class _Part:
    """A bounded piece of a line: at most ``MAX_LINE_BYTES``, ``cut`` once more was offered."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.cut = False

    def add(self, chunk: bytes, start: int, end: int) -> int:
        """Take ``chunk[start:end]`` up to the bound; the index where what was not taken starts."""
        take = min(end - start, MAX_LINE_BYTES - len(self.data))
        self.data += chunk[start:start + take]
        if start + take < end:
            self.cut = True
        return start + take

    def text(self) -> str:
        return _whole(self.data, self.cut) + (CUT_MARK if self.cut else "")


class LineSplitter:
    """See the module contract."""

    def __init__(self) -> None:
        self._head = _Part()
        self._last: _Part | None = None  # after the last carriage return past the head, once there is one

    @property
    def held(self) -> int:
        """How many bytes of the current line it holds."""
        return len(self._head.data) + (0 if self._last is None else len(self._last.data))

    def feed(self, chunk: bytes) -> list[str]:
        lines: list[str] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            self._take(chunk, start, end)
            if newline < 0:
                return lines
            lines.append(self._line())
            start = newline + 1

    def end(self) -> list[str]:
        """The partial last line, if any (the splitter is then empty)."""
        return [self._line()] if self._head.data or self._head.cut else []

    def _take(self, chunk: bytes, start: int, end: int) -> None:
        if not self._head.cut:
            start = self._head.add(chunk, start, end)
            if start == end:
                return
        carriage = chunk.rfind(b"\r", start, end)
        if carriage >= 0:
            self._last, start = _Part(), carriage + 1
        if self._last is not None:
            self._last.add(chunk, start, end)

    def _line(self) -> str:
        line = self._head.text() + ("" if self._last is None else "\r" + self._last.text())
        self._head, self._last = _Part(), None
        return line


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    splitter = LineSplitter()
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.end()


def file_chunks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path``, ``READ_BYTES`` at a time."""
    with open(path, "rb") as handle:
        yield from iter(lambda: handle.read(READ_BYTES), b"")


class LineReader:
    """Complete lines appended to a file since the last read, a bounded batch at a time (see the module contract).

    The first ``final`` read fixes the end: what a process left behind appends later is not read (a run's output
    ends with the run, so reading it to its end ends)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self._splitter = LineSplitter()
        self._end: int | None = None

    def read(self, final: bool) -> list[str]:
        lines: list[str] = []
        size = 0
        try:
            with open(self.path, "rb") as handle:
                if final and self._end is None:
                    self._end = os.fstat(handle.fileno()).st_size
                handle.seek(self.offset)
                while len(lines) < BATCH_LINES and size < BATCH_BYTES:
                    # A byte ends at most one line: never more than BATCH_LINES lines.
                    room = min(READ_BYTES, BATCH_LINES - len(lines))
                    if self._end is not None:
                        room = min(room, self._end - self.offset)
                    chunk = handle.read(room) if room > 0 else b""
                    if not chunk:
                        return lines + self._splitter.end() if final else lines
                    self.offset += len(chunk)
                    new = self._splitter.feed(chunk)
                    size += sum(len(line) for line in new)
                    lines += new
        except FileNotFoundError:
            pass
        return lines


class LineQueue:
    """The lines one reader thread follows, handed to the supervisor's thread (see the module contract).

    The reader ``put``s each line (False once the queue is ``abandon``ed: it should stop) and ``end``s it;
    ``note`` adds a line of the runtime's own without waiting (the supervisor's thread must not wait for
    itself); ``take(wait)`` returns every line held, with ``wait`` first waiting up to that long for the reader
    to end or fill it (a run that ended: the rest of its output, a batch at a time); ``wait_for(count, seconds)``
    waits until ``count`` lines were put in all, the reader ended or the queue is full.
    """

    def __init__(self) -> None:
        self._lines: deque[str] = deque()
        self._chars = 0
        self._changed = threading.Condition()
        self._abandoned = False
        self.delivered = 0
        self.ended = False

    @property
    def held(self) -> int:
        """How many lines it holds."""
        return len(self._lines)

    def _full(self) -> bool:
        return len(self._lines) >= BATCH_LINES or self._chars >= BATCH_BYTES

    def _add(self, line: str) -> None:
        self._lines.append(line)
        self._chars += len(line)

    def put(self, line: str) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: self._abandoned or not self._full())
            if self._abandoned:
                return False
            self._add(line)
            self.delivered += 1
            self._changed.notify_all()
            return True

    def note(self, line: str) -> None:
        with self._changed:
            self._add(line)
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def abandon(self) -> None:
        with self._changed:
            self._abandoned = True
            self._lines.clear()
            self._chars = 0
            self._changed.notify_all()

    def wait_for(self, count: int, seconds: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.delivered >= count or self.ended or self._full(), seconds)

    def take(self, wait: float = 0.0) -> list[str]:
        with self._changed:
            if wait:
                self._changed.wait_for(lambda: self.ended or self._full(), wait)
            lines = list(self._lines)
            self._lines.clear()
            self._chars = 0
            self._changed.notify_all()
        return lines


def interleave(streams: Mapping[str, Callable[[], Iterable[str]]]) -> Iterator[str]:
    lines: queue.Queue[str | None] = queue.Queue(maxsize=BATCH_LINES)  # full: a stream's thread waits

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
