"""The one way out to the terminal: everything the commands show passes the one escaper here.

Contract: task and spec text reaches the terminal only through this module, escaped by
``launcher.spec.problems.escaped`` (every control character shown in visible form), so it can neither
drive the terminal nor start a line of its own; ``tests/unit/test_terminal_sink.py`` enforces it.
``echo`` (one line), ``echo_lines`` (multi-line by design), ``echo_json`` (valid JSON), ``console()``
/ ``styled`` / ``live`` (rich, never markup), ``to_terminal()`` (logging and warnings) and ``raw``
(``tfcluster logs`` only, as written).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console, ConsoleOptions, RenderableType
from rich.live import Live
from rich.segment import Segment
from rich.text import Text

from launcher.spec.problems import SpecWarning, escaped


def echo(text: object, *, err: bool = False, nl: bool = True) -> None:
    """``text`` as one line: every control character escaped, its line breaks too."""
    click.echo(escaped(str(text)), err=err, nl=nl)


def echo_lines(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``text`` that is several lines by design: every control character escaped but its ``\\n`` and tabs."""
    click.echo(escaped(text, lines=True), err=err, nl=nl)


def echo_json(text: str, *, nl: bool = True) -> None:
    """JSON from ``json.dumps`` (ASCII): DEL, the one control character it leaves raw, as ``\\u007f``."""
    echo_lines(text.replace("\x7f", "\\u007f"), nl=nl)


def raw(line: str) -> None:
    """A task's own output line, unescaped: ``tfcluster logs`` only (it shows what the task wrote, as
    ``kubectl logs`` does; pipe it through ``cat -v`` to see control characters)."""
    click.echo(line)


class EscapingConsole(Console):
    """A rich ``Console`` whose strings are escaped to one line before layout, never read as markup or emoji
    codes, and whose other text is escaped as it is rendered, its line breaks kept (control segments, rich's
    own cursor moves, pass untouched). Takes ``Console``'s options but ``markup`` and ``emoji``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "markup": False, "emoji": False})

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(escaped(text), **{**options, "markup": False, "emoji": False})

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable() or segment.text == "\n":
                yield segment
            else:
                yield Segment(escaped(segment.text, lines=True), segment.style)


def console(*, stderr: bool = False, highlight: bool = True, soft_wrap: bool = False) -> EscapingConsole:
    """A rich console that escapes everything it shows (see the module contract)."""
    return EscapingConsole(stderr=stderr, highlight=highlight, soft_wrap=soft_wrap)


def styled(text: str, style: str) -> Text:
    """``text`` as one escaped line in ``style`` (e.g. ``bold``)."""
    return Text(escaped(text), style=style)


class _Live(Live):
    """rich's ``Live`` whose last view ends its line on any output: rich ends it on a terminal only, so a file or
    pipe got the last line without its newline."""

    def stop(self) -> None:
        ending = self._started and not self._nested and not self.transient and not self.console.is_terminal
        super().stop()
        if ending and self._live_render.last_render_height:
            self.console.line()


def live(on: EscapingConsole) -> Live:
    """The live view's display on ``on`` (a ``console()``); its last view ends with a newline on any output."""
    return _Live(console=on, refresh_per_second=2, transient=False)


class _LogLines(logging.Handler):
    """A log record as one escaped line on stderr (its traceback, if any, as escaped lines)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            echo(record.getMessage(), err=True)
            if record.exc_info:
                echo_lines(logging.Formatter().formatException(record.exc_info), err=True)
        except Exception:  # noqa: BLE001 - logging's own contract: a handler reports its failure, never raises
            self.handleError(record)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A ``SpecWarning`` is one line, ``warning: FILE:LINE: FIELD: ...``; others as Python words them, escaped."""
    if issubclass(category, SpecWarning):
        echo(f"warning: {message}", err=True)
    else:
        echo_lines(warnings.formatwarning(message, category, filename, lineno, line).rstrip("\n"), err=True)


@contextmanager
def to_terminal() -> Iterator[None]:
    """While a command runs: logging and warnings written through this sink (see the module contract)."""
    handler = _LogLines()
    root, own = logging.getLogger(), logging.getLogger("launcher")
    level = own.level
    root.addHandler(handler)
    own.setLevel(logging.INFO)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", SpecWarning)
            warnings.showwarning = _show_warning
            yield
    finally:
        root.removeHandler(handler)
        own.setLevel(level)
