"""A stall verdict that disrupts the run (restart or fail) is recorded in the goodput ledger at one place of the
supervisor, whatever the action (not one copy per branch, which drift apart)."""

from __future__ import annotations

import ast

from helpers import sources
from helpers.paths import REPO


def _stall_disruptions(source: str) -> int:
    """Calls ``<x>.disrupted(Disruption.STALL, ...)`` in ``source``."""
    return sum(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "disrupted"
        and bool(node.args) and ast.unparse(node.args[0]) == "Disruption.STALL"
        for node in ast.walk(sources.parse(source)))


def test_the_counter_sees_each_call() -> None:
    assert _stall_disruptions("a.disrupted(Disruption.STALL, t)\nif x:\n    b = l.disrupted(Disruption.STALL, 1)\n") == 2
    assert _stall_disruptions("a.disrupted(Disruption.RESTART, t)\na.stalled(t)\n") == 0


def test_the_supervisor_records_a_disrupting_stall_once() -> None:
    assert _stall_disruptions((REPO / "launcher" / "supervision" / "supervisor.py").read_text()) == 1
