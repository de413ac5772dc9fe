"""py-spy's failures become one clear line each: not installed, not permitted, not Python, gone."""

from __future__ import annotations

import pytest

from launcher.backends import pyspy
from launcher.protocol.stacks_signal import MAX_STACK_BYTES

#: What py-spy 0.4 writes on stderr when ptrace is refused (run as another user than the target's).
REFUSED = "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'"
NOT_PYTHON = "Error: Failed to find python version from target process\n\nStack backtrace:\n   0: anyhow::error::msg"


def test_a_refusal_names_the_ptrace_rule_and_never_advises_sudo() -> None:
    why = pyspy._why(REFUSED)
    assert why.startswith("not permitted to read the process (") and "ptrace_scope" in why and "CAP_SYS_PTRACE" in why
    assert "sudo" not in why and "\n" not in why


def test_a_program_that_is_not_python_is_said_so_in_one_line() -> None:
    assert pyspy._why(NOT_PYTHON) == "not a Python program (Failed to find python version from target process)"


def test_without_py_spy_there_are_no_stacks_and_one_line_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspy, "pyspy_binary", lambda: None)
    assert pyspy.read_local_stacks([1]) == (None, "py-spy is not installed (pip install py-spy)")


def test_a_process_that_is_gone_gives_no_stacks_and_py_spys_reason() -> None:
    dump, why = pyspy.read_local_stacks([2**22 + 1])  # above the kernel's largest pid
    assert dump is None and why.startswith("py-spy: ") and "\n" not in why, why


def test_what_py_spy_prints_is_kept_as_it_is_a_carriage_return_stays_one() -> None:
    """py-spy prints a program's command line as it is: a ``\\r`` there must reach the terminal sink as ``\\r``
    (shown escaped), not as the line break text mode's universal newlines would make of it."""
    ran = pyspy.local_runner(["printf", "Process 1: python x.py a\\rFORGED\\n"])
    assert not isinstance(ran, str) and ran.stdout == "Process 1: python x.py a\rFORGED\n"


def test_a_dump_and_a_commands_output_are_capped() -> None:
    """Many processes' dumps together, and one command's output, are at most ``MAX_STACK_BYTES``, saying so."""
    frame = 'Thread 0x1 (idle): "MainThread"\n    f (x.py:1)\n' * (MAX_STACK_BYTES // 100)
    dump, _ = pyspy.read_stacks(list(range(8)), lambda command: pyspy.Ran(0, frame, ""))
    assert dump is not None and len(dump.encode()) <= MAX_STACK_BYTES and dump.endswith(" bytes, the first kept\n")
    ran = pyspy.local_runner(["head", "-c", str(3 * MAX_STACK_BYTES), "/dev/zero"])
    assert not isinstance(ran, str) and len(ran.stdout.encode()) <= MAX_STACK_BYTES
