"""Byte quantities as Kubernetes writes them (``512Mi``, ``4G``, ``1.5Gi``), shared by the spec and the backends.

Contract: ``BYTES`` is the pattern the spec accepts for sizes (no milli
suffix: ``512m`` would be half a byte to Kubernetes and is a Docker-ism
for MiB, so it is refused rather than misread); ``byte_count`` converts a
matching quantity to whole bytes, rounded up.
"""

from __future__ import annotations

import re

BYTES = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
_SPLIT = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)$")
_FACTORS = {
    "": 1,
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def byte_count(quantity: str) -> int:
    """``quantity`` in bytes, rounded up; ValueError if it is not a byte quantity."""
    match = _SPLIT.fullmatch(quantity)
    if match is None or match.group(2) not in _FACTORS:
        raise ValueError(f"not a byte quantity: {quantity!r}")
    value = float(match.group(1)) * _FACTORS[match.group(2)]
    return int(value) + (value % 1 > 0)
