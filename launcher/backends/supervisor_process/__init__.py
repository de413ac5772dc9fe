"""The supervisor process's command line, one home for every place that starts it. Pure.

Contract: ``command(kind)`` is ``python -m launcher.backends.supervisor_process KIND``, to which the state dir
(and ``harness.ADOPT_FLAG``) are appended: ``run_supervisor`` with the registered class's ``host``
(local and compose: detached; Slurm: the batch step). ``rounds_command(kind, name)`` is the same program
with ``ROUNDS_FLAG``: ``serve_rounds`` on run ``name`` with the class's ``rounds`` (Kubernetes: the
supervisor pod). ``process(backend)`` is what ``harness.start`` starts. The program resolves ``KIND``
through the backend registry (``launcher.backends.supervisor_process.main``).
"""

from __future__ import annotations

import sys

from launcher.plan.targets import BackendKind
from launcher.supervision import harness

#: The argument that makes the process supervise in rounds a run whose engine runs the tasks (Kubernetes).
ROUNDS_FLAG = "--rounds"


def command(kind: BackendKind, python: str = sys.executable) -> list[str]:
    """The supervisor process of ``kind``'s clusters, but for its state dir (and ``harness.ADOPT_FLAG``)."""
    return [python, "-m", __name__, kind.value]


def rounds_command(kind: BackendKind, name: str, python: str = sys.executable) -> list[str]:
    """The round supervisor of ``kind``'s run ``name`` (``harness.serve_rounds``)."""
    return [python, "-m", __name__, ROUNDS_FLAG, kind.value, name]


def process(backend: type[harness.Hosting]) -> harness.Process:
    """``backend``'s supervisor process as ``harness.start`` starts it: its command and, forked, its ``host``."""
    return harness.Process(command(backend.kind), backend.host)
