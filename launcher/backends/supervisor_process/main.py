"""The supervisor process: ``KIND DIR [--adopt]`` or ``--rounds KIND NAME``, the backend found by the registry.

Contract: ``main(argv)`` resolves ``KIND`` (a ``BackendKind``) with ``launcher.backends.backend_class`` and
runs ``harness.run_supervisor`` on the state dir ``DIR`` with the class's ``host``, or ``harness.serve_rounds``
on run ``NAME`` with its ``rounds``; it returns what they return. An unknown kind, a missing argument or a
backend without rounds is one line on stderr and 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from launcher.backends import backend_class
from launcher.backends.supervisor_process import ROUNDS_FLAG
from launcher.plan.targets import BackendKind
from launcher.supervision import harness

USAGE = f"python -m launcher.backends.supervisor_process [{ROUNDS_FLAG}] KIND (DIR [{harness.ADOPT_FLAG}] | NAME)"


class _Usage(Exception):
    """A command line this program cannot run: its one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="launcher.backends.supervisor_process", add_help=False)
    parser.add_argument(ROUNDS_FLAG, dest="rounds", action="store_true")
    parser.add_argument(harness.ADOPT_FLAG, dest="adopt", action="store_true")
    parser.add_argument("kind")
    parser.add_argument("target")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the supervisor process the command line names (see the module contract)."""
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        try:
            kind = BackendKind(args.kind)
        except ValueError:
            known = ", ".join(k.value for k in BackendKind)
            raise _Usage(f"unknown backend {args.kind!r} (one of: {known})") from None
        cls = backend_class(kind)
        if args.rounds:
            rounds = getattr(cls, "rounds", None)
            if rounds is None:
                raise _Usage(f"the {kind.value} backend does not supervise in rounds")
            return harness.serve_rounds(args.target, rounds)
    except _Usage as problem:
        print(f"error: {problem}; usage: {USAGE}", file=sys.stderr)
        return 2
    return harness.run_supervisor(Path(args.target), cls.host, adopt=args.adopt)
