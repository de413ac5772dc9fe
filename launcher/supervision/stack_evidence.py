"""What two stack samples per task say of a suspected stall: typed samples in, an enum verdict out, pure.

Contract: when a stall is ``SUSPECTED`` (``launcher.supervision.stall``), supervisors read each
running task's stacks twice, ``GAP_SECONDS`` apart (``two_samples``), and ``read(samples)`` gives the
verdict over the training cluster's tasks only: ``MOVED`` (working, not a stall), ``STUCK`` (one
task holds the others; those are the suspects), ``UNCLEAR`` or ``UNREADABLE`` (time decides).
Samples compare by frames (file, line, function), whatever thread ids, order or idle marks;
``faulthandler`` and ``py-spy dump`` formats are both read. How it shows in a run:
docs/faults.md (Stalls).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from launcher.supervision.stack_dumps import in_python_op

#: Seconds between a suspected stall's two samples: longer than a task holds one frame while it works.
GAP_SECONDS = 5.0

#: A thread's header: faulthandler's (``Current thread 0x.. (most recent call first):``) or py-spy's
#: (``Thread 4243 (idle): "MainThread"``); which thread is current, and py-spy's mark, may change between samples.
_THREAD = re.compile(r"^(?:Current thread|Thread) (\S+) \([^)]*\):?(.*)$")
#: A frame: faulthandler's ``  File "f.py", line 3 in g`` or py-spy's ``    g (f.py:3)``.
_FRAME = re.compile(r'^  File ".*", line \d+ in .*$|^ {4}\S.* \(.*:\d+\)$')


class StackVerdict(str, Enum):
    MOVED = "moved"
    STUCK = "stuck"
    UNCLEAR = "unclear"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class TaskStacks:
    """One running task's two samples (None: it gave no stacks that time)."""

    first: str | None
    second: str | None
    #: The task dumps its own stacks on request (it announced the handler): a sample without them is a request
    #: it did not answer. False: read from outside (py-spy), or not at all.
    asked: bool = False
    #: Part of the training cluster (chief, worker, ps); False for an evaluator.
    trains: bool = True


@dataclass(frozen=True)
class StackReading:
    verdict: StackVerdict
    #: The tasks the stall likely sits in (``STUCK``), or the training tasks without stacks (``UNCLEAR``).
    suspects: tuple[str, ...]
    #: Why, in a few words, for people.
    why: str


def read(samples: Mapping[str, TaskStacks]) -> StackReading:
    """The verdict of the two samples of every running task (see the module contract)."""
    training = {name: s for name, s in samples.items() if s.trains}
    readable = {name: s for name, s in training.items() if s.first is not None and s.second is not None}
    moved = [name for name, s in readable.items() if thread_stacks(s.first or "") != thread_stacks(s.second or "")]
    if moved:
        return StackReading(StackVerdict.MOVED, (), f"the stacks of {', '.join(moved)} moved between the samples: "
                            "working (a save, an evaluation, a busy host)")
    without = tuple(name for name in training if name not in readable)
    if not readable:
        return StackReading(StackVerdict.UNREADABLE, (), "no training task's stacks could be read")
    in_op = tuple(name for name, s in readable.items() if in_python_op(s.second or ""))
    if in_op and (len(in_op) < len(readable) or len(training) == 1):
        return StackReading(StackVerdict.STUCK, in_op, "a thread runs Python inside a TensorFlow op "
                            "(tf.py_function / from_generator) in the same frames both times, while the others wait")
    silent = tuple(name for name in without if training[name].asked and not (training[name].first or training[name].second))
    if silent:
        return StackReading(StackVerdict.STUCK, silent, "it answered neither request for its stacks while the "
                            "others' stood still (frozen or stopped)")
    return StackReading(StackVerdict.UNCLEAR, without, "nothing moved and no task stands out"
                        + (f"; no stacks of {', '.join(without)}" if without else ""))


def thread_stacks(dump: str) -> tuple[tuple[str, ...], ...]:
    """Each thread's frames in ``dump``, sorted: what two samples are compared by."""
    found: list[list[str]] = []
    for line in dump.splitlines():
        header = _THREAD.match(line)
        if header:
            found.append([header.group(2).strip()])  # py-spy's thread name; faulthandler has none
        elif _FRAME.match(line):
            if not found:
                found.append([""])
            found[-1].append(line.strip())
    return tuple(sorted(tuple(frames) for frames in found))


def two_samples(sample: Callable[[], Mapping[str, str | None]], wait: Callable[[float], bool],
                asked: Mapping[str, bool], trains: Mapping[str, bool],
                gap_seconds: float = GAP_SECONDS) -> dict[str, TaskStacks] | None:
    """Two ``sample()`` rounds (``{task: dump or None}``) ``gap_seconds`` apart, as ``read`` takes them.

    ``wait(seconds)`` waits and returns False when the job advanced meanwhile (then None: no verdict is
    needed). A first round without any stacks is not repeated: both samples are None.
    """
    first = dict(sample())
    if not any(first.values()):
        second: Mapping[str, str | None] = dict.fromkeys(first)
    elif not wait(gap_seconds):
        return None
    else:
        second = sample()
    return {name: TaskStacks(first[name], second.get(name), asked.get(name, False), trains.get(name, True))
            for name in first}
