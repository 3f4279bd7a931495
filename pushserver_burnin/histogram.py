"""Log-bucketed latency histogram.

Workers cannot ship every sample to the master at tens of thousands of deliveries a second, so
each process counts samples in buckets 1 % wide and the master merges the buckets; percentiles
are then exact to about 1 %, the worst case and the mean exactly.
"""

from __future__ import annotations

import math
from typing import Any

_FLOOR = 1e-6  # seconds; anything faster lands in bucket 0
_LOG_BASE = math.log(1.01)


class Histogram:
    """Counts of latencies (seconds) in buckets 1 % wide, plus exact count, sum and maximum."""

    __slots__ = ("buckets", "count", "total", "worst")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.worst = -math.inf

    def add(self, value: float) -> None:
        index = int(math.log(value / _FLOOR) / _LOG_BASE) if value > _FLOOR else 0
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1
        self.total += value
        if value > self.worst:
            self.worst = value

    def merge(self, other: Histogram) -> None:
        for index, n in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + n
        self.count += other.count
        self.total += other.total
        self.worst = max(self.worst, other.worst)

    def percentile(self, fraction: float) -> float | None:
        """The value below which `fraction` of the samples lie (bucket mid-point, at most worst)."""
        if not self.count:
            return None
        rank = max(1, math.ceil(fraction * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(_FLOOR * math.exp((index + 0.5) * _LOG_BASE), self.worst)
        return self.worst

    def summary(self) -> dict[str, float | int | None]:
        """The results-file shape of one latency leg."""
        if not self.count:
            return {"worst": None, "p50": None, "p90": None, "p99": None, "mean": None, "count": 0}
        return {
            "worst": self.worst,
            "p50": self.percentile(0.50),
            "p90": self.percentile(0.90),
            "p99": self.percentile(0.99),
            "mean": self.total / self.count,
            "count": self.count,
        }

    def to_wire(self) -> list[Any]:
        """A msgpack-friendly form (no int dict keys) for worker-to-master messages."""
        return [list(self.buckets.items()), self.count, self.total, self.worst]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> Histogram:
        hist = cls()
        pairs, hist.count, hist.total, hist.worst = wire
        hist.buckets = {int(index): int(n) for index, n in pairs}
        return hist
