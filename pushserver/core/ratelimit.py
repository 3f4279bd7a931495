"""Publish rate limit: a token bucket per publisher, so one client cannot flood the fan-out.

A publisher is its publish key when the server has one (every holder of the key shares the
bucket), else its address. Each publish request (one message or one batch) takes a token; a
bucket holds at most one second's worth, refilled continuously. A bucket that has refilled
completely is the same as no bucket, so idle ones are dropped and memory stays bounded by the
number of publishers active within the last second or so, and by `max_buckets` in any case.
"""

from __future__ import annotations

import time
from collections import OrderedDict


class RateLimiter:
    def __init__(self, rate: float, max_buckets: int = 100_000) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """publisher -> (tokens, time of the last update), least recently used first."""

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, who: str, now: float | None = None) -> float:
        """Take one token for `who`; returns 0 when allowed, else seconds until one is free."""
        now = time.monotonic() if now is None else now
        self._evict(now)
        buckets = self._buckets
        tokens, then = buckets.pop(who, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            buckets[who] = (tokens - 1.0, now)
            return 0.0
        buckets[who] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _evict(self, now: float) -> None:
        """Drop buckets that are full again (least recently used first), and any over the cap."""
        buckets = self._buckets
        refill = self.capacity / self.rate
        while buckets:
            who, (_, then) = next(iter(buckets.items()))
            if now - then < refill and len(buckets) < self.max_buckets:
                break
            del buckets[who]
