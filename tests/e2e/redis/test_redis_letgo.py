"""Letting channels go (`following.Following._look`) against a real Redis: a channel is never
let go under a subscriber still waiting for it, and a read that outlives its channel leaves
nothing behind. Before, a 192,000-channel flood left up to 9,903 channels' histories held 60 s
after its end, with no record to let them go."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from unittest import mock

import pytest

from pushserver.broker.redis import following
from pushserver.broker.redis.single import RedisBroker
from pushserver.config import Settings
from pushserver_bench.channels import NoSink
from tests.inprocess import until
from tests.redis_fixture import RedisServer, redis_server_fixture

__all__ = ["redis_server_fixture"]

GRACE = 0.05
NAMES = ("letgo-a", "letgo-b")
WAIT = 10.0
"""Seconds a test waits for what it expects (a let-go takes GRACE and a PERIOD)."""


@pytest.fixture
async def broker(redis_server: RedisServer) -> AsyncIterator[RedisBroker]:
    """The engine on the real Redis, with a short grace and period, under a hub where nobody
    holds a channel: only a waiting subscriber keeps one followed."""
    engine = RedisBroker(Settings(redis=redis_server.url))
    with (
        mock.patch.object(following, "GRACE", GRACE),
        mock.patch.object(following, "PERIOD", GRACE),
    ):
        async with engine.running(NoSink()):
            yield engine


async def test_a_channel_waited_for_past_its_grace_is_kept_until_its_subscriber_leaves(
    broker: RedisBroker,
) -> None:
    waiting = broker.subscribe(NAMES, {})
    assert waiting is not None
    records = [broker.records[name] for name in NAMES]
    await until(lambda: all(rec.confirmed.done() for rec in records), "confirmed", WAIT)
    late = records[1].confirmed = asyncio.get_running_loop().create_future()
    # The second channel's confirmation is still on its way (behind a flood's): the
    # subscriber waits for it, with the first channel confirmed and not yet read.

    async def subscriber() -> bool:
        await waiting
        return all(name in broker.history for name in NAMES)  # held, as the hub does

    task = asyncio.create_task(subscriber())
    first = records[0].touched
    await until(lambda: records[0].touched > first, "the grace over and looked at", WAIT)
    assert [broker.records.get(name) for name in NAMES] == records
    late.set_result(None)
    assert await task

    broker.unsubscribe(NAMES)  # the subscriber left: the grace, then the channels go
    await until(lambda: not broker.records and not broker.history, "let go", WAIT)


async def test_a_read_of_a_channel_let_go_meanwhile_holds_no_history(
    broker: RedisBroker,
) -> None:
    waiting = broker.subscribe(NAMES[:1], {})
    assert waiting is not None
    await waiting
    rec = broker.records[NAMES[0]]
    await until(lambda: not broker.records and not broker.history, "let go", WAIT)
    await broker.publish([(NAMES[0], b"1", "")])  # its first epoch begins
    await broker._refresh([rec])  # a notification's or a resync's, asked for before
    assert NAMES[0] not in broker.history
