"""Closing held streams when their subscribe token expires.

One timer for all of them: subscribers sit in a heap ordered by expiry and the timer is set for
the earliest. A subscriber that leaves first is only dropped from the index; its heap entry is a
plain (time, number) pair that goes when it comes up, or when stale entries outnumber live ones.
No entry refers to the hub or to a channel, so nothing here forms a reference cycle.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time

from .hub import Hub
from .messages import control
from .subscription import StreamSubscriber

EXPIRED = control({"type": "expired"})


class ExpiryWatch:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, StreamSubscriber] = {}
        self._numbers: dict[StreamSubscriber, int] = {}
        self._counter = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    def __len__(self) -> int:
        return len(self._live)

    def add(self, sub: StreamSubscriber, expires: float | None) -> None:
        """Close `sub` at `expires` (epoch seconds); None means never."""
        if expires is None:
            return
        number = next(self._counter)
        self._live[number] = sub
        self._numbers[sub] = number
        heapq.heappush(self._heap, (expires, number))
        if expires < self._timer_at:
            self._schedule(expires)

    def discard(self, sub: StreamSubscriber) -> None:
        """The subscriber left; safe to call for one that was never added."""
        number = self._numbers.pop(sub, None)
        if number is None:
            return
        del self._live[number]
        if len(self._heap) > 64 + 2 * len(self._live):
            self._heap = [entry for entry in self._heap if entry[1] in self._live]
            heapq.heapify(self._heap)

    def _schedule(self, expires: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = expires
        self._timer = loop.call_at(loop.time() + max(0.0, expires - time.time()), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        heap, now = self._heap, time.time()
        while heap and heap[0][0] <= now:
            _, number = heapq.heappop(heap)
            sub = self._live.pop(number, None)
            if sub is not None:
                del self._numbers[sub]
                self._expire(sub)
        if heap:
            self._schedule(heap[0][0])

    def _expire(self, sub: StreamSubscriber) -> None:
        """Tell the subscriber why, then end it like any server-side close."""
        self.hub.detach(sub)
        if not sub.transport.is_closing():
            sub.transport.write(sub.wire([sub.framing.event(EXPIRED, None)]))
        sub.close("expired")
