"""Supervision: status types, the pure restart/success decisions over a ``JobPolicy``, the supervision
loop that drives a backend's ``Runtime``, and the harness: the one supervisor process (local and compose
detached on this machine, Slurm's batch step; ``python -m launcher.supervision``).

Imports ``plan``, ``protocol`` and ``spec``; never a backend.
"""
