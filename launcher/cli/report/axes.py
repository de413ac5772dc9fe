"""The report's chart axes (pure): which points a chart can place, the span of an axis, and its round ticks.

Contract: ``finite(points)`` keeps the points whose coordinates are both finite numbers (a rate over no
time is infinite; it is not drawn). ``Axis.of(values, floor)`` spans finite ``values`` (down to ``floor``
at least, if given) with ``low < high`` always: a single value gets a span of ``max(1, |value| / 2)``.
``Axis.fraction(value)`` is where a value lies, 0 at ``low`` and 1 at ``high``, without overflow even when
the span is beyond the largest float. ``Axis.ticks(count)`` is about ``count`` round values (1, 2 or 5 times
a power of ten apart) from ``low`` to ``high``, never more than ``2 * count + 1``, or the two ends where no
round step can be told apart at that scale (a span below the smallest normal float, or too small for values
that large): its time and memory are bounded by ``count`` whatever the values.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def finite(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points whose both coordinates are finite."""
    return [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]


@dataclass(frozen=True)
class Axis:
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float], floor: float | None = None) -> Axis:
        """The axis over ``values`` (finite, at least one), down to ``floor`` at least."""
        low, high = min(values), max(values)
        if floor is not None:
            low = min(low, floor)
        if high > low:
            return cls(low, high)
        pad = max(1.0, abs(low) / 2)
        return cls(low, low + pad) if math.isfinite(low + pad) else cls(low - pad, low)

    def fraction(self, value: float) -> float:
        """Where ``value`` lies: 0 at ``low``, 1 at ``high``."""
        span = self.high - self.low
        if math.isinf(span):  # both ends beyond half the largest float: halves do not overflow
            return (value / 2 - self.low / 2) / (self.high / 2 - self.low / 2)
        return (value - self.low) / span

    def ticks(self, count: int) -> list[float]:
        """About ``count`` round values from ``low`` to ``high``; never more than ``2 * count + 1``."""
        ends = [self.low, self.high]
        raw = (self.high - self.low) / count
        if not (math.isfinite(raw) and raw >= sys.float_info.min):
            return ends
        magnitude = 10.0 ** math.floor(math.log10(raw))
        step = next((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), raw)
        first, last = self.low / step, self.high / step
        if not (math.isfinite(first) and math.isfinite(last)):
            return ends
        first, last = math.ceil(first), math.floor(last)
        if not 0 <= last - first <= 2 * count:  # values so large that the step is lost in their rounding
            return ends
        return [k * step for k in range(first, last + 1)]
