"""Supervision: status types, the pure restart/success decisions over a ``JobPolicy``, the supervision
loop that drives a backend's ``Runtime``, and the detached-supervisor harness local and compose share.

Imports ``plan``, ``protocol`` and ``spec``; never a backend.
"""
