"""How old each fan-out's messages were when written: counted by bucket as it happens, read as a
histogram at scrape time.

A fan-out adds one to its bucket (found by `bisect`, in C) and its age to the sum, where a
prometheus-client `Histogram.observe` ran a Python loop over the buckets and two locked
increments per flush (docs/performance.md, "The publish path trimmed again", issue 35's sixth
part).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

FANOUT_AGE_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Upper bounds (seconds, sorted) of the publish-to-write histogram's buckets. Not `Final`, as
the compiled modules' constants are: mypyc 2.4.1 keeps a final tuple of floats unboxed and
its not-yet-set check misfires (`NameError` when a `Hub` is made); it is read once per hub."""


class Ages:
    """Ages counted by the first bucket whose upper bound they do not pass (`counts[i]` for
    `bounds[i]`, the last count for those above every bound), and their sum, added in the order
    they came (the float a `Histogram` would sum). The fan-out adds to them inline:
    `counts[bisect_left(bounds, age)] += 1`, `total += age`."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def cumulative(self) -> Iterator[tuple[float, float]]:
        """Each upper bound (`inf` last) with the count of ages at or below it, as floats (the
        values a `Histogram` reports)."""
        seen = 0.0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            seen += count
            yield bound, seen
