"""`Wheel`: many deadlines on one loop timer, met up to a bucket late and never before their
bucket, however they move; a crowd due at once told a slice per loop turn."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from pushserver.web.front.wheel import RESOLUTION, SLICE, Bucket, Wheel


class Clock:
    """A loop with a hand-moved clock: `call_at` timers run when `advance` passes them."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[Timer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> Timer:
        timer = Timer(when, callback)
        self.timers.append(timer)
        return timer

    def call_soon(self, callback: Any) -> Timer:
        return self.call_at(self.now, callback)

    def turn(self) -> None:
        """Run the earliest timer due by now: one loop turn's worth of this wheel."""
        timer = min((t for t in self.timers if not t.cancelled), key=lambda t: t.when)
        assert timer.when <= self.now
        self.timers.remove(timer)
        timer.callback()

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while True:
            live = [t for t in self.timers if not t.cancelled and t.when <= end]
            if not live:
                break
            timer = min(live, key=lambda t: t.when)
            self.timers.remove(timer)
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = end
        self.timers = [t for t in self.timers if not t.cancelled]


class Timer:
    def __init__(self, when: float, callback: Any) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Item:
    def __init__(self, clock: Clock, name: str, told: list[tuple[str, float]]) -> None:
        self.bucket: Bucket | None = None
        self.deadline = 0.0
        self.clock = clock
        self.name = name
        self.told = told
        self.then: Any = None

    def due(self) -> None:
        self.told.append((self.name, self.clock.now))
        if self.then is not None:
            self.then()


def setup() -> tuple[Clock, Wheel, list[tuple[str, float]]]:
    clock = Clock()
    return clock, Wheel(cast(asyncio.AbstractEventLoop, clock)), []


def test_a_deadline_is_met_within_a_bucket_and_never_early():
    clock, wheel, told = setup()
    a, b = Item(clock, "a", told), Item(clock, "b", told)
    wheel.wake(a, clock.now + 1.01)
    wheel.wake(b, clock.now + 1.02)
    clock.advance(1.0)
    assert told == []
    clock.advance(0.2)
    assert sorted(name for name, _ in told) == ["a", "b"]
    for _, at in told:
        assert 1001.01 <= at <= 1001.02 + RESOLUTION
    assert len(clock.timers) == 0  # nothing left waiting


def test_one_loop_timer_for_many_items():
    clock, wheel, told = setup()
    for i in range(100):
        wheel.wake(Item(clock, str(i), told), clock.now + 5 + i / 100)
    assert len([t for t in clock.timers if not t.cancelled]) == 1
    clock.advance(7)
    assert len(told) == 100


def test_a_deadline_moved_later_is_met_then():
    clock, wheel, told = setup()
    a = Item(clock, "a", told)
    wheel.wake(a, clock.now + 1)
    wheel.wake(a, clock.now + 3)  # stays in the first bucket, goes on from there
    clock.advance(2)
    assert told == []
    clock.advance(2)
    assert [name for name, _ in told] == ["a"]
    assert 1003 <= told[0][1] <= 1003 + RESOLUTION


def test_a_deadline_moved_earlier_is_met_then():
    clock, wheel, told = setup()
    a = Item(clock, "a", told)
    wheel.wake(a, clock.now + 60)
    wheel.wake(a, clock.now + 1)
    clock.advance(1.5)
    assert [name for name, _ in told] == ["a"]
    clock.advance(100)
    assert len(told) == 1  # once, not again at the old deadline


def test_a_cancelled_item_is_never_told():
    clock, wheel, told = setup()
    a, b = Item(clock, "a", told), Item(clock, "b", told)
    wheel.wake(a, clock.now + 1)
    wheel.wake(b, clock.now + 1)
    wheel.cancel(a)
    clock.advance(2)
    assert [name for name, _ in told] == ["b"]


def test_an_item_told_may_cancel_another_of_its_bucket_or_come_back():
    clock, wheel, told = setup()
    a, b = Item(clock, "a", told), Item(clock, "b", told)
    wheel.wake(a, clock.now + 1)
    wheel.wake(b, clock.now + 1)

    def first() -> None:
        other = b if told[-1][0] == "a" else a
        wheel.cancel(other)
        mine = a if other is b else b
        mine.then = None
        wheel.wake(mine, clock.now + 1)

    a.then = b.then = first
    clock.advance(1.5)
    assert len(told) == 1
    clock.advance(1)
    assert len(told) == 2 and told[0][0] == told[1][0]


def test_a_timer_fired_a_millisecond_early_still_meets_its_bucket():
    clock, wheel, told = setup()
    a = Item(clock, "a", told)
    wheel.wake(a, clock.now + 1)
    timer = clock.timers[0]
    clock.now = timer.when - 0.0005  # uvloop's clock counts milliseconds
    clock.timers.remove(timer)
    timer.callback()
    assert [name for name, _ in told] == ["a"]


def test_a_crowd_due_at_once_is_told_a_slice_per_loop_turn():
    clock, wheel, told = setup()
    crowd = [Item(clock, str(i), told) for i in range(2 * SLICE + 1)]
    for item in crowd:
        wheel.wake(item, clock.now + 1)
    clock.now += 1 + RESOLUTION
    clock.turn()
    assert len(told) == SLICE
    clock.turn()
    assert len(told) == 2 * SLICE
    clock.turn()
    assert sorted(name for name, _ in told) == sorted(item.name for item in crowd)
    assert not [t for t in clock.timers if not t.cancelled]  # nothing more to do


def test_an_item_waiting_for_its_slice_may_be_cancelled_or_moved_later():
    clock, wheel, told = setup()
    crowd = [Item(clock, str(i), told) for i in range(SLICE + 2)]
    for item in crowd:
        wheel.wake(item, clock.now + 1)
    clock.now += 1 + RESOLUTION
    clock.turn()
    waiting = [item for item in crowd if item.bucket is not None]
    assert len(waiting) == 2
    wheel.cancel(waiting[0])
    wheel.wake(waiting[1], clock.now + 5)
    clock.advance(1)
    assert len(told) == SLICE  # the cancelled one never, the moved one not yet
    clock.advance(5)
    assert len(told) == SLICE + 1 and told[-1][0] == waiting[1].name
    assert told[-1][1] >= 1006 + RESOLUTION


def test_a_bucket_due_while_a_crowd_is_told_waits_its_turn():
    clock, wheel, told = setup()
    crowd = [Item(clock, str(i), told) for i in range(2 * SLICE)]
    for item in crowd:
        wheel.wake(item, clock.now + 1)
    late = Item(clock, "late", told)
    wheel.wake(late, clock.now + 1 + RESOLUTION)
    clock.now += 1
    clock.turn()
    assert len(told) == SLICE
    tick = max((t for t in clock.timers if not t.cancelled), key=lambda t: t.when)
    clock.now = tick.when
    clock.timers.remove(tick)
    tick.callback()  # the next bucket comes due before the rest of the crowd is told
    assert len(told) == SLICE  # queued behind it, not told at once
    clock.turn()
    assert len(told) == 2 * SLICE
    clock.turn()
    assert told[-1][0] == "late"
