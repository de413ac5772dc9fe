"""The ``tfcluster`` command line (``launcher.cli.commands``), its live view (``watch``) and renderings (``views``)."""

from launcher.cli.commands import main

__all__ = ["main"]
