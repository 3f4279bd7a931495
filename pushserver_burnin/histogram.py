"""Latency of one leg as an HdrHistogram: mergeable across processes and runs, readable by
other tools in HdrHistogram's standard compressed base64 form.

A delivery only appends its latency to a list (tens of thousands of deliveries a second go
through one process); the samples are folded into the histogram in batches (each report, each
summary): rounded to microseconds and to the histogram's own resolution with numpy, then
recorded once per distinct value. A value and its rounding fall in the same HdrHistogram bucket,
so the histogram is the one that recording each sample would give. The count, sum and worst
case are kept exactly beside it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

US = 1e6
LOWEST_US = 1
HIGHEST_US = 3600 * 1_000_000  # an hour: anything later is recorded as an hour
DIGITS = 3  # significant digits: values exact to 0.1 %
_SUB_BUCKET_BITS = 11  # 2 * 10**DIGITS rounded up to a power of two: 2048 values per bucket
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def new_hdr() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def bucketed(seconds: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct microsecond values at the histogram's resolution, and how many of each."""
    micros = np.clip(np.rint(np.asarray(seconds, dtype=float) * US), LOWEST_US, HIGHEST_US)
    values = micros.astype(np.int64)
    shift = np.maximum(0, np.floor(np.log2(values)).astype(np.int64) + 1 - _SUB_BUCKET_BITS)
    return np.unique((values >> shift) << shift, return_counts=True)


class Latencies:
    """One leg's latencies (seconds): an HdrHistogram in µs, with exact count, sum and worst."""

    __slots__ = ("_hdr", "count", "pending", "total", "worst")

    def __init__(self) -> None:
        self.pending: list[float] = []  # samples not folded yet: `add` is the hot path
        self._hdr: HdrHistogram | None = None
        self.count = 0
        self.total = 0.0
        self.worst = -math.inf

    def add(self, seconds: float) -> None:
        self.pending.append(seconds)

    def fold(self) -> None:
        """Record the pending samples into the histogram."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.count += len(pending)
        self.total += math.fsum(pending)
        self.worst = max(self.worst, max(pending))
        hdr = self.hdr
        for value, n in zip(*bucketed(pending), strict=True):
            hdr.record_value(int(value), int(n))

    @property
    def hdr(self) -> HdrHistogram:
        if self._hdr is None:
            self._hdr = new_hdr()
        return self._hdr

    def merge(self, other: Latencies) -> None:
        other.fold()
        self.fold()
        if other.count:
            self.hdr.add(other.hdr)
        self.count += other.count
        self.total += other.total
        self.worst = max(self.worst, other.worst)

    def percentile(self, percent: float) -> float | None:
        """The latency (s) below which `percent` % of the samples lie, at most the worst."""
        self.fold()
        if not self.count:
            return None
        return min(self.hdr.get_value_at_percentile(percent) / US, self.worst)

    def encoded(self) -> str | None:
        """The histogram in HdrHistogram's standard compressed base64 form (µs)."""
        self.fold()
        return self.hdr.encode().decode("ascii") if self.count else None

    def summary(self, with_histogram: bool = True) -> dict[str, Any]:
        """The results-file shape of one latency leg."""
        self.fold()
        shape: dict[str, Any] = {"worst": None, **dict.fromkeys(PERCENTILES), "mean": None}
        shape["count"] = self.count
        if self.count:
            shape["worst"] = self.worst
            for name, percent in PERCENTILES.items():
                shape[name] = self.percentile(percent)
            shape["mean"] = self.total / self.count
        if with_histogram:
            shape["hdr"] = self.encoded()
        return shape

    def to_wire(self) -> list[Any]:
        """A msgpack-friendly form for worker-to-master messages."""
        self.fold()
        return [self.hdr.encode() if self.count else b"", self.count, self.total, self.worst]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> Latencies:
        latencies = cls()
        encoded, latencies.count, latencies.total, latencies.worst = wire
        if encoded:
            latencies._hdr = HdrHistogram.decode(encoded)
        return latencies
