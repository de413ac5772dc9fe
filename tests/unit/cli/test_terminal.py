"""The terminal sink (``launcher.cli.terminal``): what each of its ways out escapes, and what it keeps."""

from __future__ import annotations

import io
import json
import logging
import warnings
from pathlib import Path

import click
import yaml
from click.testing import CliRunner
from rich.table import Table

from launcher.cli import terminal
from launcher.cli.commands import main
from launcher.spec.problems import SpecWarning

ESCAPES = "a\x1b]52;c;SGk=\x07b\x1b[2Jc\x9b1md\x85e\u2028f\x7fg\rh"
SHOWN = "a\\x1b]52;c;SGk=\\x07b\\x1b[2Jc\\x9b1md\\x85e\\u2028f\\x7fg\\rh"


def run(body: object) -> str:
    """What ``body()`` writes, stdout and stderr, through a command."""

    @click.command()
    def command() -> None:
        body()  # type: ignore[operator]

    result = CliRunner().invoke(command)
    assert result.exception is None, result.exception
    return result.output


def test_echo_is_one_line_and_echo_lines_keeps_only_the_texts_own_lines_and_tabs() -> None:
    assert run(lambda: terminal.echo(ESCAPES + "\nX\tY")) == SHOWN + "\\nX\\tY\n"
    assert run(lambda: terminal.echo_lines(ESCAPES + "\nX\tY", err=True)) == SHOWN + "\nX\tY\n"


def test_echo_json_writes_del_the_json_way() -> None:
    """json.dumps leaves DEL raw; the sink writes ``\\u007f``, which JSON reads back as the same value."""
    shown = run(lambda: terminal.echo_json(json.dumps({"v": ESCAPES})))
    assert "\x7f" not in shown and json.loads(shown) == {"v": ESCAPES}


def render(*renderables: object) -> str:
    """What the sink's console writes for ``renderables``, as to a colour terminal."""
    out = io.StringIO()
    console = terminal.EscapingConsole(file=out, force_terminal=True, width=300, color_system="truecolor", highlight=False)
    console.print(*renderables)
    return out.getvalue()


def test_the_console_escapes_strings_cells_and_objects_and_reads_no_markup() -> None:
    table = Table("task", "message")
    table.add_row("t-0", ESCAPES)
    shown = render(table)
    assert SHOWN in shown and "\x07" not in shown and "\x85" not in shown
    link = render("[link=https://example.com]click[/link] [bold]x[/bold] :smile:")
    assert "[link=https://example.com]click[/link] [bold]x[/bold] :smile:" in link and "\x1b]8;" not in link

    class Message:
        def __str__(self) -> str:
            return ESCAPES + "\nnext"

    shown = render(terminal.styled(ESCAPES, "bold"))
    assert SHOWN in shown and "\x07" not in shown and "\x9b" not in shown
    shown = render(Message())  # rich makes a Text of its str(), dropping BEL and CR; the rest is escaped as rendered
    assert "a\\x1b]52;c;SGk=" in shown and "\\x9b1m" in shown and "\x1b]" not in shown and "\x9b" not in shown


def test_logging_and_warnings_of_a_command_come_out_escaped(tmp_path: Path) -> None:
    def body() -> None:
        with terminal.to_terminal():
            logging.getLogger("launcher.backends.pyspy").warning("no stacks of t-0: %s", ESCAPES)
            logging.getLogger("launcher.backends.image_build").info("Step 1/9 : %s", ESCAPES)
            logging.getLogger("urllib3").info("not shown: another library's INFO")
            warnings.warn(SpecWarning(f"job.yaml:3: x: {ESCAPES}"), stacklevel=1)
            warnings.warn(ESCAPES, UserWarning, stacklevel=1)

    shown = run(body)
    assert f"no stacks of t-0: {SHOWN}\n" in shown and f"Step 1/9 : {SHOWN}\n" in shown
    assert f"warning: job.yaml:3: x: {SHOWN}\n" in shown and f"UserWarning: {SHOWN}" in shown
    assert "not shown" not in shown and "\x1b" not in shown
    assert logging.getLogger("launcher").level == logging.NOTSET  # left as it was


def test_convert_writes_a_value_with_a_line_break_on_its_own_line_quoted(tmp_path: Path) -> None:
    """PyYAML writes ESC, BEL, C1 and U+2028 escaped in double quotes (``\\e``, ``\\N``, ``\\L``); a line break
    alone would continue the value on the next lines (``'x\\n\\n  FORGED'``), long values fold: neither here."""
    job = yaml.safe_load((Path(__file__).parents[3] / "examples" / "tfjob.yaml").read_text())
    container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    values = ["x\nFORGED: line", "x\n", ESCAPES, "a long value " * 20]
    container["args"] = values
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "job.yaml")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not any(line.lstrip().startswith(("FORGED", "long")) for line in lines), result.output
    assert "\x1b" not in result.output and "\x85" not in result.output and "\u2028" not in result.output
    spec = yaml.safe_load(result.output)
    assert spec["roles"]["worker"]["command"][-len(values):] == values
