"""Strings handed to tools that expand ``$``: Docker Compose (``$VAR``, ``${VAR}``) and Kubernetes (``$(VAR)``).

Both reduce ``$$`` to ``$`` and leave everything else alone, so one escape serves both.
"""


def literal(value: str) -> str:
    """``value`` escaped so Compose interpolation and Kubernetes ``$(VAR)`` expansion give it back unchanged."""
    return value.replace("$", "$$")
