"""What redis-py's asyncio Sentinel client does when its master fails over, against a real
Sentinel set (redis_sentinel.py): a master, its replica and three sentinels.

These pin what the Sentinel engine must work around: after `SENTINEL FAILOVER` the client goes
on writing to the old master, which acknowledges, for the seconds until a sentinel demotes it
(then the writes are gone), and a subscriber there hears nothing the new master publishes; the
demotion cuts the client's connections and the next ones reach the new master, which lacks the
scripts; a write to a demoted master is refused READONLY. The sentinels announce the switch at
once on their own pub/sub (`+switch-master`), seconds before the demotion.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ReadOnlyError

from ...redis_fixture import RedisServer
from ...redis_sentinel import MASTER_NAME, SentinelSet, redis_sentinels_fixture, role  # noqa: F401

DEADLINE = 30.0
INCREMENT = "return redis.call('INCR', KEYS[1])"


@pytest.fixture
async def master(redis_sentinels: SentinelSet) -> AsyncIterator[Redis]:
    """A client of the master the sentinels name, that never sends a command twice."""
    sentinel = Sentinel([("127.0.0.1", s.port) for s in redis_sentinels.sentinels])
    client = sentinel.master_for(MASTER_NAME, retry=Retry(NoBackoff(), 0))
    yield client
    await client.aclose()
    await sentinel.aclose()


async def port_of(client: Redis) -> int:
    """The port of the server the client's next command reaches."""
    return int((await client.info("server"))["tcp_port"])


async def next_message(pubsub: PubSub) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            message = await pubsub.get_message(timeout=0.1)
        except RedisConnectionError:
            continue  # the next read reconnects
        if message is not None:
            return message
    raise AssertionError("no message")


def value(server: RedisServer, key: str) -> bytes | None:
    with server.client() as client:
        got = client.get(key)
    assert got is None or isinstance(got, bytes)
    return got


async def test_writes_go_to_the_old_master_until_it_is_demoted_and_are_lost(
    redis_sentinels: SentinelSet, master: Redis
) -> None:
    assert await master.incr("x") == 1
    old, new = redis_sentinels.start_failover()
    await asyncio.to_thread(redis_sentinels.wait_promoted, new)

    # Every sentinel names the new master, yet the client's connection stays on the old one,
    # which still acknowledges writes: this one is never replicated.
    assert await master.incr("x") == 2
    assert await port_of(master) == old.port and role(old)[0] == "master"
    await asyncio.to_thread(redis_sentinels.wait_demoted, old)
    assert value(new, "x") == value(old, "x") == b"1"

    # The demotion cut the connection (a command may fail on it); the next reaches the new
    # master through the sentinels.
    with contextlib.suppress(RedisConnectionError):
        await master.incr("lost")
    assert await port_of(master) == new.port
    assert await master.incr("x") == 2


async def test_a_subscriber_on_the_old_master_hears_nothing_until_it_is_demoted(
    redis_sentinels: SentinelSet, master: Redis
) -> None:
    pubsub = master.pubsub()
    await pubsub.subscribe("ch")
    assert (await next_message(pubsub))["type"] == "subscribe"
    old, new = redis_sentinels.start_failover()
    await asyncio.to_thread(redis_sentinels.wait_promoted, new)
    with new.client() as client:
        assert client.publish("ch", "unheard") == 0
        assert client.pubsub_numsub("ch") == [(b"ch", 0)]
    with old.client() as client:
        assert client.pubsub_numsub("ch") == [(b"ch", 1)]

    await asyncio.to_thread(redis_sentinels.wait_demoted, old)
    # Cut by the demotion, the subscriber reconnects through the sentinels and subscribes again.
    assert (await next_message(pubsub))["type"] == "subscribe"
    with new.client() as client:
        assert client.publish("ch", "heard") == 1
    assert (await next_message(pubsub))["data"] == b"heard"
    await pubsub.aclose()


async def test_a_killed_master_is_followed_to_a_new_one_without_the_scripts(
    redis_sentinels: SentinelSet, master: Redis
) -> None:
    sha = await master.script_load(INCREMENT)
    assert await master.evalsha(sha, 1, "x") == 1
    await asyncio.to_thread(redis_sentinels.kill_master)
    for _ in range(2):  # the connection to the dead master fails at most once
        try:
            await master.evalsha(sha, 1, "x")
        except RedisConnectionError:
            continue
        except NoScriptError:
            break
    else:
        raise AssertionError("the client did not reach the new master")
    assert await master.eval(INCREMENT, 1, "x") == 2


async def test_a_demoted_master_refuses_a_writing_script_readonly(
    redis_sentinels: SentinelSet,
) -> None:
    redis_sentinels.failover()
    demoted = Redis(port=redis_sentinels.replica.port, retry=Retry(NoBackoff(), 0))
    with pytest.raises(ReadOnlyError):
        await demoted.eval(INCREMENT, 1, "y")
    assert await demoted.get("y") is None
    await demoted.aclose()


async def test_the_sentinels_announce_the_switch_before_the_old_master_is_demoted(
    redis_sentinels: SentinelSet,
) -> None:
    sentinel = Redis(port=redis_sentinels.sentinels[1].port)
    events = sentinel.pubsub()
    await events.subscribe("+switch-master")
    assert (await next_message(events))["type"] == "subscribe"
    old, new = redis_sentinels.start_failover()
    switch = await next_message(events)
    assert switch["data"].split() == [
        MASTER_NAME.encode(),
        b"127.0.0.1",
        str(old.port).encode(),
        b"127.0.0.1",
        str(new.port).encode(),
    ]
    assert role(old)[0] == "master"  # still accepting writes
    await asyncio.to_thread(redis_sentinels.wait_demoted, old)
    await events.aclose()
    await sentinel.aclose()
