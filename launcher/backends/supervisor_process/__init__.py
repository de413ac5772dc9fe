"""The supervisor process's command line, one home for every place that starts it. Pure.

Contract: ``command(kind)`` is ``python -m launcher.backends.supervisor_process KIND``, to which the state
(the class's ``state_of``: a directory; Kubernetes: the run's name) and ``harness.ADOPT_FLAG`` are appended:
``run_supervisor`` with the registered class's ``host`` (local and compose: detached; Slurm: the batch step;
Kubernetes: the supervisor pod). ``process(backend)`` is what ``harness.start`` starts. The program resolves
``KIND`` through the backend registry (``launcher.backends.supervisor_process.main``).
"""

from __future__ import annotations

import sys

from launcher.backends.interface import Backend
from launcher.plan.targets import BackendKind
from launcher.supervision import harness


def command(kind: BackendKind, python: str = sys.executable) -> list[str]:
    """The supervisor process of ``kind``'s clusters, but for its state (and ``harness.ADOPT_FLAG``)."""
    return [python, "-m", __name__, kind.value]


def process(backend: type[Backend]) -> harness.Process:
    """``backend``'s supervisor process as ``harness.start`` starts it: its command and, forked, its ``host``."""
    return harness.Process(command(backend.kind), backend.host, backend.state_of)
