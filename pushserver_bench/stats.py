"""Percentiles and rates for the tables, in milliseconds where they are times."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> float:
    return seconds * 1000.0


def summary_ms(values: list[float]) -> tuple[float, float, float]:
    """Median, p99 and max of `values` (seconds), in milliseconds."""
    if not values:
        return float("nan"), float("nan"), float("nan")
    return ms(statistics.median(values)), ms(percentile(values, 0.99)), ms(max(values))


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("nan")
