"""Latency of one leg as an HdrHistogram: mergeable across processes and runs, readable by
other tools in HdrHistogram's standard compressed base64 form.

A delivery only appends its latency to a list: tens of thousands of deliveries a second go
through one Locust process, and recording each into an HdrHistogram (pure Python) or encoding
a histogram at every report would double what a delivery costs it. So each process counts its
samples in HdrHistogram's own buckets, in batches with numpy: rounded to microseconds and to
the histogram's resolution (HdrHistogram's lowest equivalent value: the same bucket), then
counted per distinct value. Those sparse bucket counts are what travels to the master, which
adds them up and builds the step's HdrHistogram from them, one `record_value` per distinct
value: the histogram that recording every sample would give. Count, sum and worst case are
kept exactly beside it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

US = 1e6
LOWEST_US = 1
HIGHEST_US = 3600 * 1_000_000  # an hour: anything later is recorded as an hour
DIGITS = 2  # significant digits: values exact to 1 %, as the percentiles need
_SUB_BUCKET_BITS = 8  # 2 * 10**DIGITS rounded up to a power of two: 256 values per bucket
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
    """One leg's latencies (seconds): HdrHistogram bucket counts (µs), exact count, sum, worst."""

    __slots__ = ("buckets", "count", "pending", "total", "worst")

    def __init__(self) -> None:
        self.pending: list[float] = []  # samples not counted yet: `add` is the hot path
        self.buckets: dict[int, int] = {}  # HdrHistogram's lowest equivalent value (µs): count
        self.count = 0
        self.total = 0.0
        self.worst = -math.inf

    def add(self, seconds: float) -> None:
        self.pending.append(seconds)

    def fold(self) -> None:
        """Count the pending samples into their buckets."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.count += len(pending)
        self.total += math.fsum(pending)
        self.worst = max(self.worst, max(pending))
        values, counts = bucketed(pending)
        self._add_buckets(values.tolist(), counts.tolist())

    def _add_buckets(self, values: list[int], counts: list[int]) -> None:
        buckets = self.buckets
        for value, n in zip(values, counts, strict=True):
            buckets[value] = buckets.get(value, 0) + n

    def merge(self, other: Latencies) -> None:
        other.fold()
        self.fold()
        self._add_buckets(list(other.buckets), list(other.buckets.values()))
        self.count += other.count
        self.total += other.total
        self.worst = max(self.worst, other.worst)

    def hdr(self) -> HdrHistogram:
        """The HdrHistogram of every sample so far."""
        self.fold()
        hdr = new_hdr()
        for value, n in self.buckets.items():
            hdr.record_value(value, n)
        return hdr

    def summary(self, with_histogram: bool = True) -> dict[str, Any]:
        """The results-file shape of one latency leg; with `with_histogram`, the histogram in
        HdrHistogram's standard compressed base64 form (µs) as `hdr`."""
        self.fold()
        shape: dict[str, Any] = {"worst": None, **dict.fromkeys(PERCENTILES), "mean": None}
        shape["count"] = self.count
        if self.count:
            hdr = self.hdr()
            shape["worst"] = self.worst
            for name, percent in PERCENTILES.items():
                shape[name] = min(hdr.get_value_at_percentile(percent) / US, self.worst)
            shape["mean"] = self.total / self.count
            if with_histogram:
                shape["hdr"] = hdr.encode().decode("ascii")
        elif with_histogram:
            shape["hdr"] = None
        return shape

    def to_wire(self) -> list[Any]:
        """A msgpack-friendly form for worker-to-master messages: the sparse bucket counts."""
        self.fold()
        return [list(self.buckets), list(self.buckets.values()), self.count, self.total, self.worst]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> Latencies:
        latencies = cls()
        values, counts, latencies.count, latencies.total, latencies.worst = wire
        latencies._add_buckets(values, counts)
        return latencies
