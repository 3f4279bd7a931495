"""Closing Redis connections never holds the engine.

Closing the old master's connections hung once under load (the master SIGKILLed and restarted
on its port during a Sentinel failover): the switch waited in the old shard's `close`, the node
never subscribed on the new master, and its subscribers got nothing more for 60 s. The switch
now closes them in the background and goes on to the new master at once; and a close is bounded
by `link.bounded`, which, unlike `asyncio.wait_for`, does not wait for a cancelled close to end.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pushserver.broker.redis import link
from pushserver.broker.redis.sentinel import SentinelBroker
from pushserver.config import Settings

GUARD = 10.0
"""Seconds after which a switch that waits for the old master's close is a hang, not slowness."""


class Link:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.up = False

    async def start(self) -> None:
        self.started.set()

    async def close(self) -> None:
        pass


class Shard:
    def __init__(self, name: str) -> None:
        self.name = name
        self.link = Link()
        self.closing = asyncio.Event()
        self.closed = asyncio.Event()

    async def close(self, closing: Any) -> None:
        self.closing.set()
        await self.closed.wait()  # never set: a close that hangs


async def test_a_switch_goes_to_the_new_master_while_the_old_one_is_still_closing() -> None:
    engine = SentinelBroker(Settings(redis="redis+sentinel://127.0.0.1:1/master"))
    engine._sink = cast(Any, object())
    old, new = Shard("old:1"), Shard("new:2")
    engine.shard, engine.address = cast(Any, old), ("old", 1)
    engine.open_node = lambda url, name, **credentials: cast(Any, new)  # type: ignore[method-assign]
    await asyncio.wait_for(engine._switch(("new", 2)), GUARD)
    assert new.link.started.is_set() and engine.shard is cast(Any, new)
    await asyncio.wait_for(old.closing.wait(), GUARD)  # it is closed, in the background
    engine.shard = None
    await engine.stop()  # and the close is given up with the engine


async def test_a_close_that_ignores_its_cancellation_is_left_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(link, "CLOSE_TIMEOUT", 0.05)
    release = asyncio.Event()
    cancelled = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                cancelled.set()

    await asyncio.wait_for(link.bounded(stubborn()), GUARD)
    await asyncio.wait_for(cancelled.wait(), GUARD)  # it was told
    release.set()


async def test_what_a_close_raises_is_dropped() -> None:
    async def failing() -> None:
        raise OSError("socket gone")

    await link.bounded(failing())
