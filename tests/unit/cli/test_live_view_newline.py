"""The live view's last view ends with a newline when the output is a file or a pipe (rich ends it on a terminal
only), so the next output (a shell prompt, the next line of a log) does not join it."""

from __future__ import annotations

import io

from launcher.cli import terminal
from launcher.cli.watch import watch
from launcher.plan.targets import BackendKind
from launcher.supervision.status import JobStatus, State


class DoneBackend:
    """A job that has succeeded at the first look."""

    def adopt(self, name: str) -> list[str]:
        return []

    def describe(self, name: str) -> JobStatus:
        return JobStatus(name, BackendKind.LOCAL, State.SUCCEEDED)


def test_watch_into_a_pipe_ends_its_last_line(capsys) -> None:
    assert watch(DoneBackend(), "demo", poll_seconds=0) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "demo [local]: succeeded" in out and out.endswith("\n") and not out.endswith("\n\n"), repr(out)


def test_on_a_terminal_rich_ends_the_line_and_no_second_newline_is_added() -> None:
    def shown(is_terminal: bool) -> str:
        buffer = io.StringIO()
        console = terminal.EscapingConsole(file=buffer, force_terminal=is_terminal, width=80)
        with terminal.live(console) as live:
            live.update("last line")
        return buffer.getvalue()

    assert shown(False) == "last line\n"
    assert shown(True) == "\x1b[?25llast line\n\x1b[?25h"  # the cursor hidden, then shown again
