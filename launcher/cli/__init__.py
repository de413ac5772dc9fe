"""The ``tfcluster`` command line (``launcher.cli.commands``), its live view (``watch``) and renderings (``views``).

Everything they show leaves through ``terminal``, the one sink that escapes task and spec text.

``main`` is the program (the ``tfcluster`` script, ``python -m launcher``): a short-lived process holding nothing
but the controller, so the supervisors it starts are forked from it (``launcher.supervision.detach``).
Callers in a process of their own (tests through ``click.testing``) invoke ``launcher.cli.commands.main``.
"""

from typing import Any

from launcher.cli import commands
from launcher.supervision import detach


def main(**click_options: Any) -> None:
    detach.fork_from_this_process()
    commands.main(**click_options)


__all__ = ["main"]
