"""The supervisor process: ``KIND STATE [--adopt]``, the backend found by the registry.

Contract: ``main(argv)`` resolves ``KIND`` (a ``BackendKind``) with ``launcher.backends.backend_class`` and
runs ``harness.run_supervisor`` on the class's ``state_of(STATE)`` (a state dir; Kubernetes: a run's name)
with its ``host``, returning what that returns. An unknown kind or a bad command line is one line on stderr and 2.
It ends by ``detach.end`` (``__main__``), as a process ``detach.start`` spawns does.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from launcher.backends import backend_class
from launcher.plan.targets import BackendKind
from launcher.supervision import harness

USAGE = f"python -m launcher.backends.supervisor_process KIND STATE [{harness.ADOPT_FLAG}]"


class _Usage(Exception):
    """A command line this program cannot run: its one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="launcher.backends.supervisor_process", add_help=False)
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
    except _Usage as problem:
        print(f"error: {problem}; usage: {USAGE}", file=sys.stderr)
        return 2
    return harness.run_supervisor(cls.state_of(args.target), cls.host, adopt=args.adopt)
