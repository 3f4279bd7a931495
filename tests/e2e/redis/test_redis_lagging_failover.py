"""A failover to a replica that lacks acknowledged messages hands out no id twice.

With two replicas and `--redis-replicas 1` (`WAIT 1`), the replica that confirmed a publish need
not be the one promoted: here one replica is paused while the other confirms publishes, the
master is paused, and the lagging replica is promoted (Sentinel, by its priority; a cluster, by
`CLUSTER FAILOVER TAKEOVER`). The promoted replica's counter is behind ids nodes delivered; the
engine does not trust it (`WAIT` did not cover every replica, `Engine.trusted`), so the
channel's epoch ends there before any id is handed out again, and subscribers get an epoch gap.
Before, it was trusted: the ids came again with other messages, dropped as already seen by the
node that had delivered the lost ones.

Detection by position, the net for a rollback nothing else notices, runs on one Redis: the
channel's counter and stream are set back (as a restore behind what nodes saw would), and the
node's next read ends the epoch.

A node cut off from the sentinels through the failover still holds the old epoch: a kept
long-poll there, asked from a cursor another node gave in the new epoch, must not be answered
from it.

Real pushserver processes on a real Sentinel set, Redis Cluster (three primaries, two replicas
each) and redis-server on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...redis_cluster import channel_in_slot, running_cluster
from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...redis_sentinel import MASTER_NAME, SentinelSet, running_sentinels
from ...tcpproxy import TcpProxy
from ...wire import Subscriber, publish, streaming, take, wait_for_stats
from .test_redis_broker import answer, kept_poll, node_args, wait_until
from .test_redis_cluster_engine import healthy, log_tail, publish_across

WRITTEN = 3
"""Acknowledged publishes the promoted replica lacks."""


def written_past(meta: str) -> Callable[[RedisServer], bool]:
    """A probe for the failover helpers: the channel's counter on the server asked is
    `WRITTEN` past where it was at the first call."""
    start: list[int] = []

    def probe(server: RedisServer) -> bool:
        with server.client() as admin:
            now = int(admin.hget(meta, "i") or 0)
        start[:] = start or [now]
        return now >= start[0] + WRITTEN

    return probe


async def received(sub: Subscriber, last: Any, timeout: float = 60.0) -> list[dict[str, Any]]:
    """The subscriber's events up to the message `last` (or until the time is up): messages
    come in order, so by then every earlier one has come or been skipped."""
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async for event in sub.events():
            events.append(event)
            if event.get("data") == last:
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run(), timeout)
    return events


def check(events: list[dict[str, Any]], ordered: list[int], transport: str) -> None:
    """Every acknowledged message delivered once and in order, or missing only where an epoch
    gap stands; no epoch and id ever names two messages; the epoch ended at the failover."""
    named: dict[tuple[str, int], Any] = {}
    delivered = []
    for event in events:
        if "data" in event:
            _, epoch, id_ = event["cursor"].rsplit(":", 2)
            assert named.setdefault((epoch, int(id_)), event["data"]) == event["data"], event
            delivered.append(event["data"])
        else:
            assert event["type"] == "gap" and event["reason"] == "epoch", (transport, event)
            delivered.append("gap")
    messages = [d for d in delivered if d != "gap"]
    assert len(set(messages)) == len(messages), (transport, delivered)
    missing = [n for n in ordered if n not in messages]
    assert delivered.count("gap") == 1, f"{transport}: {missing} missing, no epoch gap"
    at = delivered.index("gap")
    before, after = delivered[:at], delivered[at + 1 :]
    # what is missing is missing where the gap is: the old epoch's tail, the new one's head
    assert ordered[: len(before)] == before, (transport, delivered, ordered)
    assert ordered[len(ordered) - len(after) :] == after, (transport, delivered, ordered)


async def run_lagging(
    url: str, factory: Callable[..., ServerProcess], channel: str, fail_over: Callable[[], object]
) -> list[str]:
    """Keyed publishes through node a while `fail_over` runs (in a thread), to subscribers on
    node b; the checks of `check`, and both nodes healthy afterwards. Returns node b's
    `/stats` `broker_warnings`."""
    a = factory("--redis", url, "--heartbeat", "0.5", "--redis-replicas", "1")
    b = factory("--redis", url, "--heartbeat", "0.5", "--redis-replicas", "1")
    async with aiohttp.ClientSession() as s:
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node on Redis")
        subs = await streaming(s, b.url, channel)
        acked = await publish_across(s, a, channel, fail_over)
        ordered = list(acked)  # acknowledged one after another: the order of their ids
        for sub in subs:
            try:
                check(await received(sub, ordered[-1]), ordered, sub.transport)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; {log_tail(b)}") from None
        for node in (a, b):
            await wait_until(lambda node=node: healthy(s, node), "node healthy again")
        stats = await wait_for_stats(s, b.url, lambda st: True, "stats")
        return list(stats["broker_warnings"])


@pytest.mark.slow
async def test_a_sentinel_failover_to_a_lagging_replica_ends_the_epoch(
    server_factory: Callable[..., ServerProcess],
) -> None:
    with running_sentinels(replicas=2, priorities=(10, 100)) as sentinels:
        probe = written_past("pushserver:m:lagged")
        warnings = await run_lagging(
            sentinels.url,
            server_factory,
            "lagged",
            lambda: sentinels.failover_to_lagging(probe),
        )
    assert len(warnings) == 1 and "--redis-replicas 2" in warnings[0], warnings


@pytest.mark.slow
async def test_a_cluster_takeover_by_a_lagging_replica_ends_the_epoch(
    server_factory: Callable[..., ServerProcess],
) -> None:
    channel = channel_in_slot(6000)
    with running_cluster(replicas=2) as cluster:
        probe = written_past(f"pushserver:{{{channel}}}:m")
        warnings = await run_lagging(
            cluster.url,
            server_factory,
            channel,
            lambda: cluster.takeover_lagging(6000, probe),
        )
    assert len(warnings) == 1 and "--redis-replicas 2" in warnings[0], warnings


async def test_a_read_behind_what_the_node_delivered_ends_the_epoch(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    node = server_factory(*node_args(redis_server))
    async with aiohttp.ClientSession() as s:
        subs = await streaming(s, node.url, "rolled")
        for n in range(5):
            await publish(s, node.url, "rolled", f"a{n}")
        for sub in subs:
            assert [e["id"] for e in await take(sub, 5)] == [1, 2, 3, 4, 5], sub.transport
        with redis_server.client() as admin:  # Redis set back to id 3, its lineage unchanged
            admin.hset("pushserver:m:rolled", "i", 3)
            admin.xdel("pushserver:h:rolled", "4-0", "5-0")
            admin.client_kill_filter(_type="pubsub")  # the node reconnects and reads again
        for sub in subs:
            [gap] = await take(sub, 1)
            assert gap["type"] == "gap" and gap["reason"] == "epoch", (sub.transport, gap)
        after = [await publish(s, node.url, "rolled", f"b{n}") for n in range(2)]
        assert [m["id"] for m in after] == [1, 2]  # a new epoch: ids 4 and 5 never come again
        for sub in subs:
            assert [e["data"] for e in await take(sub, 2)] == ["b0", "b1"], sub.transport


class Partition:
    """A node's way to the sentinels, one `TcpProxy` per sentinel: while `cut`, what its
    connections carry is held and every new one is cut before the sentinel's first reply, so
    the node neither hears `+switch-master` nor learns the new master by asking."""

    def __init__(self) -> None:
        self.cut = False
        self.proxies: list[TcpProxy] = []

    async def open(self, stack: contextlib.AsyncExitStack, sentinels: SentinelSet) -> str:
        """The proxies, closed with `stack`; the sentinel URL through them."""
        for sentinel in sentinels.sentinels:
            proxy = TcpProxy(sentinel.port, cut_after=lambda: 0 if self.cut else None)
            self.proxies.append(await stack.enter_async_context(proxy))
        seeds = ",".join(f"127.0.0.1:{proxy.port}" for proxy in self.proxies)
        return f"redis+sentinel://{seeds}/{MASTER_NAME}/0"

    def start(self) -> None:
        self.cut = True
        for proxy in self.proxies:
            proxy.hold()

    def heal(self) -> None:
        self.cut = False
        for proxy in self.proxies:
            proxy.resume()


@pytest.mark.slow
async def test_a_kept_poll_from_a_cursor_in_the_epoch_a_lagging_failover_began_never_gets_the_old(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Node B is cut off from the sentinels while a lagging replica is promoted and the old
    master dies: A follows the failover, its publishes end the channel's epoch there, and it
    hands its client a cursor in the new one. B still follows the channel (its streams hold
    it) in the old epoch. That cursor, sent on the poll B kept there, is refused `503
    broker_down` while B reaches no master (B holds only the old epoch's messages: an epoch
    gap and those would hand the client its 1 and 2 again, what a kept poll answered before
    it asked the broker), and once B follows the failover the same connection gets what A
    answers for that cursor: the new epoch's messages after it."""
    args = ("--heartbeat", "0.5", "--redis-replicas", "1")
    partition = Partition()
    with running_sentinels(replicas=2, priorities=(10, 100)) as sentinels:
        async with contextlib.AsyncExitStack() as stack, aiohttp.ClientSession() as s:
            url_b = await partition.open(stack, sentinels)
            a = server_factory("--redis", sentinels.url, *args)
            b = await asyncio.to_thread(server_factory, "--redis", url_b, *args)  # proxies run here
            for node in (a, b):
                await wait_until(lambda node=node: healthy(s, node), "node on Redis")
            kept = await stack.enter_async_context(kept_poll(s, a, b, partition.proxies, "lagged"))
            await streaming(s, b.url, "lagged")  # B follows the channel through the failover
            partition.start()
            probe = written_past("pushserver:m:lagged")
            await publish_across(s, a, "lagged", lambda: sentinels.failover_to_lagging(probe))

            async def from_a(cursor: str) -> dict[str, Any]:
                params = {"cursor": cursor, "timeout": "0"}
                async with s.get(f"{a.url}/lp/lagged", params=params) as r:
                    assert r.status == 200, await r.text()
                    return dict(await r.json())

            handed = await from_a(kept.cursor)
            assert handed["messages"][0]["reason"] == "epoch", handed["messages"][0]
            kept.ask(handed["cursor"])
            status, body = await answer(kept.reader)
            assert (status, body.get("error")) == (503, "broker_down"), (status, body)
            partition.heal()
            await wait_until(lambda: healthy(s, b), "node b on the new master")
            kept.ask(handed["cursor"])
            body = await kept.answer()
            assert body == await from_a(handed["cursor"]), log_tail(b)
            after = int(handed["cursor"].rsplit(":", 1)[1])
            assert [m["id"] for m in body["messages"]][:1] == [after + 1], body
