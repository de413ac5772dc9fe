"""Supervision: status types, the ``Runtime`` protocol every backend implements (``runtime``), the pure decisions
over a ``JobPolicy`` (``rules``), the supervision loop that drives a backend's ``Runtime`` (``supervisor``, and the
collaborators it composes), and the harness: the one supervisor process (local and compose
detached on this machine, Slurm's batch step, the Kubernetes supervisor pod; its entry,
``python -m launcher.backends.supervisor_process``, finds the backend through the registry).

Imports ``plan``, ``protocol`` and ``spec``; never a backend.
"""
