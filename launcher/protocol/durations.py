"""Durations for people: the one formatter every line a person reads uses (the worker's backup reason, the live
view and ``status``, the report page).

Contract: ``for_people(seconds)`` is one or two figures and a unit: ``0.8 s``, ``4.2 s``, ``42 s``, ``40 min``,
``1.3 h``, ``3 d``. Machine outputs (JSON, tables of seconds) keep their numbers as they are.
"""

from __future__ import annotations


def for_people(seconds: float) -> str:
    """``seconds`` in one or two figures: seconds below 2 min, minutes below 1 h, hours below 2 d, then days."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.2g} h"
    return f"{seconds / 86400:.2g} d"
