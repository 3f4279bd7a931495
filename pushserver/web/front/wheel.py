"""`Wheel`: the deadlines of many connections on one loop timer.

Every connection waits for something with a deadline of seconds: its next request head
(`--request-timeout`) or a held long-poll's answer (`?timeout`). A loop timer each costs about
600 bytes (uvloop's handle, its libuv timer and the bound method it calls), a quarter of what a
held long-poll keeps. Here deadlines share buckets of `RESOLUTION` seconds and one loop timer
waits for the earliest bucket, so a held connection costs one dict entry; a deadline is met up
to `RESOLUTION` late (and up to `EARLY` early: the loop's clock counts milliseconds).

A deadline moved later leaves its item in the earlier bucket (the usual case: every re-poll
moves it later); when that bucket is due, the item goes on to the bucket of its deadline.

Clients that connected together time out together: after a restart, a whole crowd of held
polls can share one bucket. Due items are told `SLICE` per loop turn, so a message published
meanwhile is delivered between slices instead of after all of them.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import deque
from typing import Final, Protocol

from mypy_extensions import mypyc_attr

RESOLUTION: Final = 0.05
"""Seconds per bucket: how late a deadline may be met."""
EARLY: Final = 0.001
"""A bucket this close to due when the loop timer fires is due (uvloop's timers count ms)."""
SLICE: Final = 100
"""Due items told per loop turn: an expired poll and the re-poll it brings cost the loop about
75 µs, so a slice holds it for about 8 ms (docs/performance.md, experiment 10)."""


class Timed(Protocol):
    """What waits on a wheel: its deadline (loop time), the bucket it is in, and what to do
    when the deadline is met."""

    bucket: Bucket | None
    deadline: float

    def due(self) -> None: ...


@mypyc_attr(native_class=False)
class Bucket(dict[Timed, None]):
    """The items due at one tick (loop time `tick * RESOLUTION`)."""

    __slots__ = ("tick",)

    def __init__(self, tick: int) -> None:
        super().__init__()
        self.tick = tick


class Wheel:
    """Buckets of items by the tick they are due at, and one loop timer for the earliest."""

    __slots__ = ("buckets", "due", "loop", "ticks", "timer", "timer_tick")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buckets: dict[int, Bucket] = {}
        self.ticks: list[int] = []
        """The ticks of `buckets`, a heap (a bucket emptied by `cancel` stays until due)."""
        self.timer: asyncio.TimerHandle | None = None
        self.timer_tick = 0
        self.due: deque[Bucket] = deque()
        """Buckets come due whose items are still to be told, a slice per loop turn (while it
        is not empty, the next slice is due at the next loop turn)."""

    def wake(self, item: Timed, deadline: float) -> None:
        """Call `item.due()` at loop time `deadline` (up to `RESOLUTION` later)."""
        item.deadline = deadline
        tick = math.ceil(deadline / RESOLUTION)
        bucket = item.bucket
        if bucket is not None:
            if bucket.tick <= tick:
                return
            bucket.pop(item, None)
        bucket = self.buckets.get(tick)
        if bucket is None:
            bucket = self.buckets[tick] = Bucket(tick)
            heapq.heappush(self.ticks, tick)
            if self.timer is None or tick < self.timer_tick:
                self._schedule(tick)
        bucket[item] = None
        item.bucket = bucket

    def cancel(self, item: Timed) -> None:
        """`item` waits for nothing any more."""
        bucket = item.bucket
        if bucket is not None:
            bucket.pop(item, None)
            item.bucket = None

    def _schedule(self, tick: int) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_tick = tick
        self.timer = self.loop.call_at(tick * RESOLUTION, self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        ticks, buckets, due = self.ticks, self.buckets, self.due
        telling = bool(due)  # the next slice is already due at the next loop turn
        while ticks and ticks[0] * RESOLUTION <= now + EARLY:
            bucket = buckets.pop(heapq.heappop(ticks), None)
            if bucket:
                due.append(bucket)
        if ticks:
            self._schedule(ticks[0])
        if not telling:
            self._tell()

    def _tell(self) -> None:
        """Tell up to `SLICE` due items; the rest at the next loop turn."""
        due, left = self.due, SLICE
        while due and left:
            bucket = due[0]
            while bucket and left:  # popped one by one: an item told may cancel another
                item = bucket.popitem()[0]
                left -= 1
                item.bucket = None
                if math.ceil(item.deadline / RESOLUTION) > bucket.tick:
                    self.wake(item, item.deadline)  # moved later meanwhile
                else:
                    item.due()
            if not bucket:
                due.popleft()
        if due:
            self.loop.call_soon(self._tell)
