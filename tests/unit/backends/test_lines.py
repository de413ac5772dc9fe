"""A task's output cut into lines (``launcher.backends.lines``): linear in time, bounded in memory, whatever it prints.

Every backend's reader splits through ``LineSplitter`` (``iter_lines``: Docker's and the API server's log streams;
``LineReader``: the log files of local processes and Slurm steps); ``tests/safety/test_safety_long_lines.py``
drives each backend's own reading point.
"""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.backends.lines import (
    BATCH_LINES,
    CUT_MARK,
    MAX_LINE_BYTES,
    READ_BYTES,
    LineReader,
    LineSplitter,
    interleave,
    iter_lines,
)
from launcher.protocol.events import EventReader, Step, format_event, new_token

#: Eight megabytes without a newline, as a task that prints one endless line writes them.
ENDLESS_BYTES = 8 * 1024 * 1024
CHUNK = b"x" * 4096


def endless() -> Iterator[bytes]:
    """``ENDLESS_BYTES`` in 4 KiB chunks, each the same object: feeding them allocates nothing of the input's size."""
    for _ in range(ENDLESS_BYTES // len(CHUNK)):
        yield CHUNK


def peak_bytes(work: callable) -> tuple[object, int]:  # type: ignore[valid-type]
    """What ``work()`` returns and the most memory it held at once (``tracemalloc``)."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(60)
def test_eight_megabytes_without_a_newline_are_split_in_bounded_memory_and_linear_work() -> None:
    """The work, counted: after each chunk the splitter holds at most two bounded parts of the line (so no chunk
    costs more than its own bytes and that bound), and the whole run never held more than a few times the bound
    (the quadratic splitter copied an ever-longer buffer: 8 MB held, gigabytes copied)."""
    splitter = LineSplitter()
    fed, most_held = 0, 0

    def split() -> list[str]:
        nonlocal fed, most_held
        lines = []
        for chunk in endless():
            lines += splitter.feed(chunk)
            fed, most_held = fed + 1, max(most_held, splitter.held)
        return lines + splitter.end()

    lines, peak = peak_bytes(split)
    assert lines == ["x" * MAX_LINE_BYTES + CUT_MARK]
    assert fed == ENDLESS_BYTES // len(CHUNK) and most_held <= 2 * MAX_LINE_BYTES
    assert peak < 8 * MAX_LINE_BYTES, peak


@pytest.mark.timeout(60)
def test_iter_lines_over_an_endless_line_stays_bounded() -> None:
    lines, peak = peak_bytes(lambda: list(iter_lines(endless())))
    assert lines == ["x" * MAX_LINE_BYTES + CUT_MARK]
    assert peak < 8 * MAX_LINE_BYTES, peak


@pytest.mark.timeout(60)
def test_a_log_file_of_one_endless_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    with open(log, "wb") as handle:
        for chunk in endless():
            handle.write(chunk)
    reader = LineReader(log)
    first, peak = peak_bytes(lambda: reader.read(final=False))
    assert first == [] and peak < 2 * READ_BYTES + 8 * MAX_LINE_BYTES, peak
    with open(log, "ab") as handle:
        handle.write(b"\nafter\n")
    assert reader.read(final=True) == ["x" * MAX_LINE_BYTES + CUT_MARK, "after"]


@pytest.mark.parametrize(("size", "expected"), [
    (MAX_LINE_BYTES - 1, "y" * (MAX_LINE_BYTES - 1)),
    (MAX_LINE_BYTES, "y" * MAX_LINE_BYTES),
    (MAX_LINE_BYTES + 1, "y" * MAX_LINE_BYTES + CUT_MARK),
], ids=["cap-1", "cap", "cap+1"])
def test_a_line_is_kept_whole_up_to_the_cap_and_cut_past_it(size: int, expected: str) -> None:
    data = b"y" * size + b"\nnext\n"
    assert list(iter_lines([data])) == [expected, "next"]
    assert list(iter_lines([data[i:i + 1000] for i in range(0, len(data), 1000)])) == [expected, "next"]


@pytest.mark.parametrize("character", ["é", "€", "😀"])  # 2, 3 and 4 bytes
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_a_cut_through_a_multibyte_character_drops_that_character_whole(character: str, offset: int) -> None:
    text = "a" * offset + character * MAX_LINE_BYTES
    [line] = iter_lines([text.encode()])
    kept = line.removesuffix(CUT_MARK)
    assert line.endswith(CUT_MARK) and "\ufffd" not in kept
    assert text.startswith(kept) and MAX_LINE_BYTES - 4 < len(kept.encode()) <= MAX_LINE_BYTES


def test_the_rest_of_a_cut_line_is_dropped_until_its_newline_and_the_next_line_is_whole() -> None:
    chunks = [b"z" * MAX_LINE_BYTES, b"dropped" * 1000, b" still dropped\nthe next line\npartial"]
    assert list(iter_lines(chunks)) == ["z" * MAX_LINE_BYTES + CUT_MARK, "the next line", "partial"]


def test_an_event_after_an_over_long_progress_bar_is_still_read() -> None:
    """A progress bar redrawn with carriage returns for a whole epoch is one long line; the event written after it
    (``format_event``: a carriage return first) is what a terminal shows last, and what the cut line keeps."""
    token = new_token()
    bar = b"".join(b"\r%6d/100000 [=====>....] - loss: 0.1234" % step for step in range(5000))
    event = format_event(Step(task="t", time=1.0, step=7), "t", token).encode()
    [line] = iter_lines([bar[i:i + 4096] for i in range(0, len(bar), 4096)] + [event + b"\n"])
    assert len(line.encode()) <= 2 * (MAX_LINE_BYTES + len(CUT_MARK)) + 1
    parsed = EventReader(token).parse(line)
    assert isinstance(parsed, Step) and parsed.step == 7


def test_lines_split_anywhere_across_chunks_are_the_same_lines() -> None:
    data = "first\r\nsecond é\n\nthird 😀 no newline".encode()
    whole = list(iter_lines([data]))
    assert whole == ["first\r", "second é", "", "third 😀 no newline"]
    for at in range(len(data) + 1):
        assert list(iter_lines([data[:at], data[at:]])) == whole


def test_a_log_file_is_read_a_bounded_batch_at_a_time_to_the_end_it_had_when_the_run_ended(tmp_path: Path) -> None:
    """``BATCH_LINES`` lines a read at most; the first final read fixes the end: what a process the run left behind
    appends afterwards is not read, so reading an ended run to its end ends."""
    log = tmp_path / "task.log"
    log.write_bytes(b"".join(b"%d\n" % n for n in range(2 * BATCH_LINES + 5)) + b"partial")
    reader = LineReader(log)
    first = reader.read(final=True)
    with open(log, "ab") as handle:
        handle.write(b" left behind\nmore\n")
    batches = [first]
    while batches[-1]:
        batches.append(reader.read(final=True))
    assert [len(batch) for batch in batches] == [BATCH_LINES, BATCH_LINES, 6, 0]
    assert batches[2][-1] == "partial"


@pytest.mark.timeout(120)
def test_interleave_holds_a_bounded_number_of_lines_its_reader_has_not_taken() -> None:
    """A stream far faster than its reader (``logs`` to a slow terminal) waits: never more than ``BATCH_LINES`` lines
    held (and the one its thread holds, and the one the reader is handed), none lost."""
    total, produced, consumed, ahead = 3 * BATCH_LINES, [0], [0], [0]
    moved = threading.Condition()

    def stream() -> Iterator[str]:
        for n in range(total):
            with moved:
                produced[0] += 1
                ahead[0] = max(ahead[0], produced[0] - consumed[0])
                moved.notify_all()
            yield str(n)

    lines = interleave({"a": stream})
    got = [next(lines)]
    consumed[0] = 1
    with moved:  # the reader lags: the stream goes as far ahead as it may
        assert moved.wait_for(lambda: produced[0] >= BATCH_LINES + 2, timeout=60)
    for line in lines:
        got.append(line)
        consumed[0] += 1
    assert got == [f"a | {n}" for n in range(total)]
    assert ahead[0] <= BATCH_LINES + 2, ahead[0]
