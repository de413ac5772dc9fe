"""The supervisor process: ``KIND STATE [--adopt]``, the backend found by the registry.

Contract: ``main(argv)`` resolves ``KIND`` (a ``BackendKind``) with ``launcher.backends.backend_class`` and
runs ``harness.run_supervisor`` on the class's ``state_of(STATE)`` (a state dir; Kubernetes: a run's name)
with its ``host``, returning what that returns. An unknown kind or a bad command line is one line on stderr and 2.
``end(code)`` ends the process with that code as the interpreter's exit would (its ``atexit`` handlers run: the
Kubernetes client deletes its copies of the kubeconfig's keys; stdout and stderr flushed) but without the
interpreter's finalization, which aborts the process (134, "could not acquire lock for <stderr> ... possibly due to
daemon threads") when a daemon thread (a runtime's log follower) holds stderr as it ends; a pod's Job counts that
abort as a failure, and a supervisor that left its tasks to the next one (143: its pod moved) met it in CI.
"""

from __future__ import annotations

import argparse
import atexit
import os
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


def end(code: int) -> NoReturn:
    """End the process with ``code`` (see the module contract): exit handlers, flushed output, no finalization."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
