"""The Sentinel engine end to end: real pushserver processes on a real Sentinel set (a master,
a replica, three sentinels; see redis_sentinel.py), through a failover Sentinel is asked for and
one it makes when the master is killed.

Under keyed publishes through one node to subscribers on another: every acknowledged message
reaches each subscriber once and in order, no id is handed out twice, and both nodes are healthy
again afterwards. During `SENTINEL FAILOVER` the old master goes on accepting writes for seconds;
the engine leaves it as soon as the sentinels name the new one, and a publish that reached it
meanwhile finds no replica to wait for, so it is refused, never acknowledged and lost.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import aiohttp

from pushserver.launcher import ServerProcess

from .redis_sentinel import SentinelSet, redis_sentinels_fixture  # noqa: F401
from .test_redis_broker import wait_until
from .test_redis_cluster_engine import healthy, keyed
from .wire import Subscriber, take, wait_for_subscribers


async def run_through(
    sentinels: SentinelSet,
    factory: Callable[..., ServerProcess],
    change: Callable[[], object],
) -> None:
    a = factory("--redis", sentinels.url, "--heartbeat", "0.5")
    b = factory("--redis", sentinels.url, "--heartbeat", "0.5")
    counter = itertools.count()
    async with aiohttp.ClientSession() as s:
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node on the master")
        subs = [Subscriber(s, b.url, t, "watched") for t in ("stream", "sse", "ws")]
        for sub in subs:
            await sub.connect()
        await wait_for_subscribers(s, b.url, "watched", len(subs))
        acked = {n: await keyed(s, a, "watched", n) for n in itertools.islice(counter, 5)}
        changing = asyncio.create_task(asyncio.to_thread(change))
        while not changing.done():
            n = next(counter)
            acked[n] = await keyed(s, a, "watched", n)
        await changing
        acked |= {n: await keyed(s, a, "watched", n) for n in itertools.islice(counter, 5)}

        ordered = sorted(acked, key=acked.__getitem__)
        assert [acked[n] for n in ordered] == list(range(1, len(acked) + 1))
        for sub in subs:
            got = await take(sub, len(acked), timeout=60)
            assert [e["data"] for e in got] == ordered, sub.transport
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node healthy again")


async def test_a_requested_failover_is_followed_before_the_old_master_is_demoted(
    redis_sentinels: SentinelSet, server_factory: Callable[..., ServerProcess]
) -> None:
    await run_through(redis_sentinels, server_factory, redis_sentinels.failover)


async def test_a_killed_master_is_followed_to_the_promoted_replica(
    redis_sentinels: SentinelSet, server_factory: Callable[..., ServerProcess]
) -> None:
    def kill_and_revive() -> None:
        redis_sentinels.revive(redis_sentinels.kill_master())

    await run_through(redis_sentinels, server_factory, kill_and_revive)
