"""Letting followed channels go (`following.Following._look`): one timer over the records
ordered by last touch lets each go within its grace and one period, and none while a subscriber
holds it or waits for it. A timer per channel before left uvloop's timer set at 1 MB after a
192,000-channel flood."""

from __future__ import annotations

import asyncio
import random
from typing import Any
from unittest import mock

import pytest

from pushserver.broker.redis import following
from pushserver.config import Settings
from pushserver.core.messages import Message

GRACE = 3.0
PERIOD = 1.0


class Clock:
    """The engine's loop for its timer: `call_later` runs when `advance` passes it."""

    def __init__(self) -> None:
        self.now = 500.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Any) -> asyncio.Handle:
        assert delay >= 0
        self.timers.append((self.now + delay, callback))
        return mock.Mock(spec=asyncio.TimerHandle)

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while due := sorted((t for t in self.timers if t[0] <= end), key=lambda t: t[0]):
            when, callback = due[0]
            self.timers.remove(due[0])
            self.now = max(self.now, when)
            callback()
        self.now = end


class Link:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def send(self, command: str, topic: bytes) -> bool:
        self.sent.append((command, topic))
        return True


class Shard:
    def __init__(self) -> None:
        self.link = Link()

    def subscribe(self, topic: bytes) -> asyncio.Future[None]:
        self.link.send("SUBSCRIBE", topic)
        confirmed = asyncio.get_running_loop().create_future()
        confirmed.set_result(None)
        return confirmed


class Hub:
    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def append(self, message: Message) -> None:
        pass

    def jump(self, name: str) -> None:
        pass

    def audience(self, name: str) -> int:
        return self.held.get(name, 0)


class Engine(following.Following):
    def __init__(self, clock: Clock, hub: Hub) -> None:
        super().__init__(Settings())
        self._loop = clock  # type: ignore[assignment]
        self._sink = hub
        self.shard = Shard()
        self.gone: dict[str, float] = {}
        self.looks: list[int] = []
        self.clock = clock

    def shard_of(self, name: str) -> following.Shard | None:
        return self.shard  # type: ignore[return-value]

    def _look(self) -> None:
        self.looks.append(len(self.records))
        super()._look()

    def _let_go(self, rec: following.Listen) -> None:
        self.gone[rec.name] = self.clock.now
        super()._let_go(rec)


@pytest.fixture
async def engine() -> Engine:
    return Engine(Clock(), Hub())


async def test_every_channel_goes_within_its_grace_and_one_period(engine: Engine) -> None:
    rng = random.Random(36)
    touched: dict[str, float] = {}
    for step in range(200):
        for _ in range(rng.randrange(0, 30)):
            name = f"ch{rng.randrange(400)}"
            if name not in engine.gone:
                engine._listen(name)
                touched[name] = engine.clock.now
        if step % 7 == 0:  # a subscriber left: its release touches its channels
            for name in rng.sample(sorted(engine.records), min(5, len(engine.records))):
                engine._touch(engine.records[name])
                touched[name] = engine.clock.now
        engine.clock.advance(rng.uniform(0.01, 0.4))
    engine.clock.advance(GRACE + PERIOD)
    assert not engine.records and not engine.idle and not engine.by_topic
    assert set(engine.gone) == set(touched)
    for name, when in engine.gone.items():
        assert touched[name] + GRACE <= when <= touched[name] + GRACE + PERIOD, name
    unsubscribed = sorted(t for c, t in engine.shard.link.sent if c == "UNSUBSCRIBE")
    assert unsubscribed == sorted(t for c, t in engine.shard.link.sent if c == "SUBSCRIBE")


async def test_none_goes_while_a_subscriber_holds_or_waits_for_it(engine: Engine) -> None:
    held, waited, free = (engine._listen(name) for name in ("held", "waited", "free"))
    engine._sink.held["held"] = 1  # type: ignore[union-attr]
    with engine.waited([waited]):
        engine.clock.advance(10 * (GRACE + PERIOD))
        assert set(engine.records) == {"held", "waited"}
        assert "held" not in engine.idle  # looked at again only when its subscriber leaves
    left = engine.clock.now
    engine._sink.held["held"] = 0  # type: ignore[union-attr]
    engine._touch(held)
    engine.clock.advance(GRACE + PERIOD)
    assert not engine.records
    assert engine.gone["free"] <= free.touched + GRACE + PERIOD
    assert left + GRACE <= engine.gone["held"] <= left + GRACE + PERIOD
    assert engine.gone["waited"] <= left + GRACE + PERIOD
    assert held not in engine.idle.values()


async def test_a_flood_goes_in_bounded_looks_all_within_its_period(engine: Engine) -> None:
    start = engine.clock.now
    with mock.patch.object(following, "SWEEP", 100):
        for n in range(1_000):
            engine._listen(f"flood{n}")
        engine.clock.advance(GRACE + PERIOD)
    assert not engine.records and not engine.idle
    assert max(engine.gone.values()) <= start + GRACE + PERIOD
    assert engine.looks == [1_000 - 100 * n for n in range(10)]  # 100 at a time, at once
