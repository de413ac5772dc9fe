"""What reaches the terminal has one home: ``launcher.cli.terminal``, checked in the source (AST).

No other module of the controller may so much as name a way to the
terminal: ``print``; click's writers (``echo``, ``secho``, ``get_text_stream``,
``clear``, ...), however click or the name was imported, or fetched with
``getattr``; ``sys.stdout``/``sys.stderr``; a rich console, live display or
``Text`` (only ``Table`` and ``Group``, which print nothing, may be built
elsewhere); logging's ``StreamHandler``/``basicConfig``; ``traceback.print_*``;
``os.write``. A name is caught wherever it is used (called, passed as a
callback, aliased), not only in one form of call. The task side (the worker,
``launcher.progress``, the examples: what they print is the task's output)
and the detached supervisor, writing its own log file, are the exceptions,
each named with why.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from helpers import sources
from helpers.paths import REPO

PACKAGE = REPO / "launcher"
SINK = "launcher/cli/terminal.py"
#: What a task runs: its stdout and stderr are its output (``tfcluster logs``), read by the controller.
TASK_SIDE = ("launcher/worker/", "launcher/progress.py", "launcher/examples/")
#: Functions writing the detached supervisor's own log (``supervisor.log``, Slurm's ``batch.log``): its
#: stdout and stderr are that file, never a terminal; its last line reaches one only inside a ``LaunchError``,
#: which the CLI shows through the sink.
LOG_WRITERS = {
    "launcher/supervision/detach.py": {"start", "_be_detached", "end"},  # flush; point the streams at the log
    "launcher/supervision/harness.py": {"run_supervisor", "_fail"},
    "launcher/supervision/publisher.py": {"log"},  # the supervisor's one line in its log
    "launcher/backends/supervisor_process/main.py": {"main"},  # a command line it cannot run: one line, exit 2
}
CLICK_WRITERS = {"echo", "secho", "echo_via_pager", "get_text_stream", "get_binary_stream", "open_file", "clear",
                 "progressbar", "prompt", "confirm", "pause", "edit"}
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
#: What may be imported from rich outside the sink: renderables that print nothing themselves.
RICH_ALLOWED = {("rich.table", "Table"), ("rich.console", "Group"), ("rich.console", "RenderableType")}
LOGGING_WRITERS = {"StreamHandler", "basicConfig"}


class _Writers(ast.NodeVisitor):
    """Every reference to a terminal writer in one module, as ``(line, function, what)``."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # local name -> module it is bound to
        self.found: list[tuple[int, str, str]] = []
        self.function = ""

    def _add(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), self.function, what))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, self.function or node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.modules[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            if alias.name.split(".")[0] == "rich":
                self._add(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if module.split(".")[0] == "click" and alias.name in CLICK_WRITERS:
                self._add(node, f"from {module} import {alias.name}")
            elif module == "sys" and alias.name in STREAMS:
                self._add(node, f"from sys import {alias.name}")
            elif module.split(".")[0] == "rich" and (module, alias.name) not in RICH_ALLOWED:
                self._add(node, f"from {module} import {alias.name}")
            elif module == "logging" and alias.name in LOGGING_WRITERS:
                self._add(node, f"from logging import {alias.name}")
            elif module == "builtins" and alias.name == "print":
                self._add(node, "from builtins import print")
            elif module in ("traceback", "os") and (alias.name.startswith("print_") or alias.name == "write"):
                self._add(node, f"from {module} import {alias.name}")
            else:
                self.modules.setdefault(alias.asname or alias.name, f"{module}.{alias.name}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "print" and node.id not in self.modules:
            self._add(node, "print")

    def _module(self, node: ast.AST) -> str | None:
        """The module ``node`` names (``click``, ``click.utils``, ``sys``), through the imports' aliases."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._module(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = self._module(node.value)
        if base is not None and self._writes(base, node.attr):
            self._add(node, f"{base}.{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        """``getattr(click, "echo")``: a writer named by a string."""
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            base, attr = self._module(node.args[0]), node.args[1]
            if base is not None and isinstance(attr, ast.Constant) and isinstance(attr.value, str) \
                    and self._writes(base, attr.value):
                self._add(node, f"getattr({base}, {attr.value!r})")
        self.generic_visit(node)

    @staticmethod
    def _writes(module: str, attr: str) -> bool:
        top = module.split(".")[0]
        return ((top == "click" and attr in CLICK_WRITERS) or (module == "sys" and attr in STREAMS)
                or (top == "rich" and attr in {"print", "get_console", "inspect", "print_json"})
                or (module == "logging" and attr in LOGGING_WRITERS) or (module == "builtins" and attr == "print")
                or (module == "traceback" and attr.startswith("print_")) or (module == "os" and attr == "write"))


def writers(source: str) -> list[tuple[int, str, str]]:
    visitor = _Writers()
    visitor.visit(sources.parse(source))
    return visitor.found


def offenders() -> Iterator[str]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name == SINK or name.startswith(TASK_SIDE):
            continue
        for line, function, what in writers(path.read_text()):
            if function not in LOG_WRITERS.get(name, set()):
                yield f"{name}:{line} ({function or 'module'}): {what}"


def test_only_the_sink_writes_to_the_terminal() -> None:
    assert list(offenders()) == [], "show it through launcher.cli.terminal (docs/security.md)"


@pytest.mark.parametrize("source", [
    "import click\nclick.echo(line)",
    "import click as c\nc.echo(line, err=True)",
    "from click import echo\necho(line)",
    "from click import secho as say\nsay(line)",
    "import click\nwrite = click.echo\nwrite(line)",
    "import click\nlines.map(click.echo)",
    "import click\ngetattr(click, 'echo')(line)",
    "import click.utils\nclick.utils.echo(line)",
    "import click\nclick.get_text_stream('stdout').write(line)",
    "print(line)",
    "callback(print)",
    "import builtins\nbuiltins.print(line)",
    "import sys\nsys.stderr.write(line)",
    "import sys as system\nsystem.stdout.write(line)",
    "from sys import stderr\nstderr.write(line)",
    "from rich.console import Console\nConsole().print(line)",
    "import rich\nrich.print(line)",
    "from rich import print as show\nshow(line)",
    "from rich.text import Text\nview.append(Text(line))",
    "from rich.live import Live\nLive()",
    "import logging\nlogging.basicConfig()",
    "import logging\nlog.addHandler(logging.StreamHandler())",
    "import traceback\ntraceback.print_exc()",
    "import os\nos.write(2, line.encode())",
])
def test_the_check_finds_each_way_to_the_terminal(source: str) -> None:
    assert writers(source), source


@pytest.mark.parametrize("source", [
    "from launcher.cli import terminal\nterminal.echo(line)",
    "from rich.table import Table\nfrom rich.console import Group\nGroup(Table('a'))",
    "import logging\nlog = logging.getLogger(__name__)\nlog.warning('%s', line)",
    "import click\n@click.command()\n@click.option('--x')\ndef f(x): raise click.UsageError(x)",
    "import sys\nsys.exit(1)",
    "console.print(view)",  # a console is the sink's: it escapes what it prints
])
def test_the_check_lets_the_sink_and_what_prints_nothing_be(source: str) -> None:
    assert writers(source) == [], source


def test_the_check_sees_the_source() -> None:
    """Guard against a vacuous pass: the sink and the log writers hold what the check looks for."""
    assert {what for _, _, what in writers((REPO / SINK).read_text())} >= {"click.echo", "from rich.live import Live"}
    for path, functions in LOG_WRITERS.items():
        found = {function for _, function, _ in writers((REPO / path).read_text())}
        assert found == functions, path
