"""``python -m launcher`` is the ``tfcluster`` command."""

from launcher.cli import main

main(prog_name="tfcluster")
