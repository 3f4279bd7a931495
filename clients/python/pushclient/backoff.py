"""Reconnect delays: exponential with jitter, so a restarted server is not hit by a stampede."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry `attempt` (1, 2, ...): `initial * factor**(attempt-1)`, capped at
    `maximum`, then scaled by a random factor in [1 - jitter, 1]."""

    initial: float = 0.25
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The range the delay before `attempt` is drawn from, before any Retry-After."""
        base = min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))
        return base * (1.0 - self.jitter), base

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The delay before `attempt`; never shorter than the server's `retry_after`."""
        low, high = self.bounds(attempt)
        delay = random.uniform(low, high)
        return delay if retry_after is None else max(delay, retry_after)


class Retries:
    """Failed attempts in a row, for the backoff. An attempt that made progress (the server's
    answer began: a 200 head, a completed WebSocket handshake) starts the count again, so on a
    link that drops often but delivers every time each retry waits only the first delay."""

    __slots__ = ("backoff", "failures")

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.failures = 0

    def progress(self) -> None:
        self.failures = 0

    def failed(self, retry_after: float | None = None) -> float:
        """Count a failed attempt; the delay before the next one."""
        self.failures += 1
        return self.backoff.delay(self.failures, retry_after)
