"""The Redis broker: several nodes on one Redis behave as one server.

Every test runs real pushserver processes against a real redis-server on ephemeral loopback
ports (see redis_fixture.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture, script_stats  # noqa: F401
from ...tcpproxy import TcpProxy
from ...wire import TRANSPORTS, Subscriber, publish, publish_batch, take, wait_for_subscribers
from ..transports.test_core_transports import head_cursor

Nodes = tuple[ServerProcess, ServerProcess]


def node_args(redis: RedisServer, *extra: str) -> tuple[str, ...]:
    return ("--redis", redis.url, "--heartbeat", "0.5", *extra)


@pytest.fixture
def nodes(redis_server: RedisServer, server_factory: Callable[..., ServerProcess]) -> Nodes:
    """Two nodes on one Redis (Redis first, so it outlives them at teardown)."""
    return server_factory(*node_args(redis_server)), server_factory(*node_args(redis_server))


def ids(events: list[dict[str, Any]]) -> list[int]:
    return [e["id"] for e in events]


async def wait_until(probe: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll an async probe until it returns something truthy (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await probe()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {timeout}s (last: {result!r})")
        await asyncio.sleep(0.05)


async def test_publish_on_one_node_reaches_subscribers_on_both(nodes: Nodes) -> None:
    a = nodes[0]
    total = 40
    async with aiohttp.ClientSession() as s:
        start = await head_cursor(s, a.url, "news")
        subs = []
        for node in nodes:
            for transport in TRANSPORTS:
                cursor = start if transport == "longpoll" else None
                sub = Subscriber(s, node.url, transport, "news", cursor)
                await sub.connect()
                subs.append(sub)
        for node in nodes:
            await wait_for_subscribers(s, node.url, "news", 3)  # the held streams
        readers = [asyncio.create_task(take(sub, total)) for sub in subs]
        for n in range(1, total + 1):
            published = await publish(s, a.url, "news", {"n": n})
            assert published["id"] == n
        for sub, reader in zip(subs, readers, strict=True):
            events = await reader
            assert ids(events) == list(range(1, total + 1)), sub.transport
            assert [e["data"] for e in events] == [{"n": n} for n in range(1, total + 1)]
            assert len({e["cursor"] for e in events}) == total
            await sub.close()


async def test_concurrent_publishing_from_both_nodes_gives_unique_gapless_ids(
    nodes: Nodes,
) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        watchers = []
        for node in nodes:
            sub = Subscriber(s, node.url, "stream", "race")
            await sub.connect()
            watchers.append(sub)
            await wait_for_subscribers(s, node.url, "race", 1)
        singles = [publish(s, node.url, "race", n) for n in range(100) for node in nodes]
        batches = [
            publish_batch(s, node.url, [{"channel": "race", "data": n}] * 10)
            for n in range(5)
            for node in nodes
        ]
        results = await asyncio.gather(*singles, *batches)
        assigned = [r["id"] for r in results[: len(singles)]]
        for batch in results[len(singles) :]:
            batch_ids = [r["id"] for r in batch]
            assert batch_ids == list(range(batch_ids[0], batch_ids[0] + 10))  # in order
            assigned += batch_ids
        total = len(singles) + 10 * len(batches)
        assert sorted(assigned) == list(range(1, total + 1))
        for sub in watchers:
            assert ids(await take(sub, total)) == list(range(1, total + 1))
            await sub.close()


async def test_subscribers_joining_while_another_node_publishes_get_each_message_once(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
) -> None:
    """The subscribe race: the backlog read from Redis vs notifications already in flight."""
    a = server_factory(*node_args(redis_server, "--history-size", "1000"))
    b = server_factory(*node_args(redis_server, "--history-size", "1000"))
    total = 300
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        start = await head_cursor(s, a.url, "join")

        async def until(sub: Subscriber, last: int) -> list[int]:
            seen: list[int] = []
            await sub.connect()
            async for event in sub.events():
                seen.append(event["id"])
                if event["id"] >= last:
                    break
            await sub.close()
            return seen

        late: list[asyncio.Task[list[int]]] = []
        resumed: list[asyncio.Task[list[int]]] = []
        for n in range(total):
            if n % 15 == 0:
                for transport in ("stream", "ws"):
                    new = Subscriber(s, b.url, transport, "join")
                    old = Subscriber(s, b.url, transport, "join", start)
                    late.append(asyncio.create_task(until(new, total)))
                    resumed.append(asyncio.create_task(until(old, total)))
            await publish(s, a.url, "join", n)
        while not all(task.done() for task in late):  # late joiners need one more message
            await publish(s, a.url, "join", "tail")
            await asyncio.wait(late, timeout=0.2)
        for got in [task.result() for task in late] + await asyncio.gather(*resumed):
            assert got == list(range(got[0], got[-1] + 1)), got
        assert all(task.result()[0] == 1 for task in resumed)


async def test_resume_on_another_node_loses_and_repeats_nothing(nodes: Nodes) -> None:
    a, b = nodes
    async with aiohttp.ClientSession() as s:
        for transport in TRANSPORTS:
            channel = f"resume-{transport}"
            start = await head_cursor(s, a.url, channel)
            first = Subscriber(s, a.url, transport, channel, start)
            await first.connect()
            for n in range(5):
                await publish(s, a.url, channel, n)
            assert ids(await take(first, 5)) == [1, 2, 3, 4, 5]
            await first.close()
            for n in range(5, 8):
                await publish(s, b.url, channel, n)
            second = Subscriber(s, b.url, transport, channel, first.cursor)
            await second.connect()
            reader = asyncio.create_task(take(second, 5))
            for n in range(8, 10):
                await publish(s, a.url, channel, n)
            events = await reader
            assert ids(events) == [6, 7, 8, 9, 10], transport
            assert [e["data"] for e in events] == [5, 6, 7, 8, 9]
            await second.close()


async def test_cursor_ahead_of_a_node_that_has_not_seen_the_channel_yet(nodes: Nodes) -> None:
    """B learns the channel's state from Redis, so A's newest cursor is valid on B at once."""
    a, b = nodes
    async with aiohttp.ClientSession() as s:
        await publish(s, a.url, "fresh", "x")
        async with s.get(f"{a.url}/lp/fresh", params={"history": "1", "timeout": "0"}) as r:
            cursor = (await r.json())["cursor"]
        async with s.get(f"{b.url}/lp/fresh", params={"cursor": cursor, "timeout": "0"}) as r:
            assert r.status == 200, await r.text()
            assert await r.json() == {"messages": [], "cursor": cursor}


async def last_data(s: aiohttp.ClientSession, base: str, channel: str) -> list[Any]:
    """The data of `channel`'s last message, read by a long-poll asking for history."""
    async with s.get(f"{base}/lp/{channel}", params={"history": "1", "timeout": "0"}) as r:
        assert r.status == 200, await r.text()
        return [m["data"] for m in (await r.json())["messages"]]


async def test_a_node_reads_a_channel_in_one_round_trip_and_after_redis_lost_the_script(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Reading a channel's history is one pipeline of script calls by digest (no `SCRIPT
    EXISTS` before it); when Redis lost the script, it is loaded and the read made again."""
    node = server_factory(*node_args(redis_server))
    client = redis_server.client()
    async with aiohttp.ClientSession() as s:
        for name in ("warm", "first", "second"):
            for n in (1, 2):
                await publish(s, node.url, name, n)
        assert await last_data(s, node.url, "warm") == [2]  # the node's first read loads it
        client.config_resetstat()
        assert await last_data(s, node.url, "first") == [2]
        stats = client.info("commandstats")
        assert "cmdstat_script|exists" not in stats
        calls, failed = script_stats(client)["evalsha"]
        assert calls >= 1 and failed == 0
        assert "cmdstat_script|load" not in stats
        client.script_flush()
        client.config_resetstat()
        assert await last_data(s, node.url, "second") == [2]
        stats = client.info("commandstats")
        assert stats["cmdstat_script|load"]["calls"] == 1
        assert script_stats(client)["evalsha"][1] == 1  # NOSCRIPT, then read again
        assert "cmdstat_script|exists" not in stats


async def test_gap_when_cursor_is_older_than_the_redis_history(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
) -> None:
    a = server_factory(*node_args(redis_server, "--history-size", "5"))
    b = server_factory(*node_args(redis_server, "--history-size", "5"))
    async with aiohttp.ClientSession() as s:
        await publish(s, a.url, "old", 1)
        async with s.get(f"{a.url}/lp/old", params={"history": "1", "timeout": "0"}) as r:
            cursor = (await r.json())["cursor"]
        for n in range(2, 14):
            await publish(s, a.url, "old", n)
        for transport in ("longpoll", "stream"):
            sub = Subscriber(s, b.url, transport, "old", cursor)
            await sub.connect()
            events = await take(sub, 6)
            assert events[0]["type"] == "gap"
            assert (events[0]["from"], events[0]["to"], events[0]["reason"]) == (2, 8, "expired")
            assert ids(events[1:]) == [9, 10, 11, 12, 13]
            await sub.close()


async def test_redis_outage_refuses_publishing_and_recovers_without_duplicates(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
) -> None:
    a = server_factory(*node_args(redis_server))
    b = server_factory(*node_args(redis_server))
    async with aiohttp.ClientSession() as s:
        held = {}
        for transport in ("stream", "sse", "ws"):
            held[transport] = sub = Subscriber(s, b.url, transport, "live")
            await sub.connect()
        await wait_for_subscribers(s, b.url, "live", 3)
        for n in range(3):
            await publish(s, a.url, "live", n)
        # Redis dies only once b has ids 1-3: one still on its way would be lost with it.
        for transport, sub in held.items():
            assert ids(await take(sub, 3)) == [1, 2, 3], transport
        readers = {t: asyncio.create_task(take(sub, 4, timeout=60)) for t, sub in held.items()}
        async with s.get(f"{b.url}/lp/live", params={"history": "3", "timeout": "0"}) as r:
            old_cursor = (await r.json())["messages"][0]["cursor"]  # after id 1

        redis_server.stop(signal.SIGKILL)

        async def refused() -> bool:
            async with s.post(f"{a.url}/pub/live", json="lost") as r:
                if r.status == 201:
                    return False
                body = await r.json()
                return (
                    r.status == 503
                    and body["error"] == "broker_down"
                    and "Retry-After" in r.headers
                )

        await wait_until(refused, "503 broker_down while Redis is down")

        async def unhealthy() -> bool:  # each node notices the loss on its own connection
            for node in (a, b):
                async with s.get(f"{node.url}/healthz") as r:
                    if r.status != 503:
                        return False
            return True

        await wait_until(unhealthy, "/healthz 503 on both nodes while Redis is down")
        for path in ("lp", "stream", "sse", "ws"):  # a channel no node follows yet
            async with s.get(f"{a.url}/{path}/unfollowed") as r:
                assert r.status == 503, path
                assert (await r.json())["error"] == "broker_down"
                assert "Retry-After" in r.headers

        marks = held["stream"].heartbeats
        await wait_until(
            lambda: asyncio.sleep(0, held["stream"].heartbeats > marks + 1),
            "heartbeats on held streams during the outage",
        )
        assert not any(reader.done() for reader in readers.values())

        redis_server.restart()

        async def healthy() -> bool:
            for node in (a, b):
                async with s.get(f"{node.url}/healthz") as r:
                    if r.status != 200:
                        return False
            return True

        await wait_until(healthy, "both nodes healthy after Redis returned")
        for n in range(3, 6):
            await publish(s, a.url, "live", n)
        for transport, reader in readers.items():
            events = await reader
            gap = events[0]
            assert (gap["type"], gap["reason"], gap["from"], gap["to"]) == ("gap", "epoch", 1, 0)
            assert ids(events[1:]) == [1, 2, 3], transport
            assert [e["data"] for e in events[1:]] == [3, 4, 5]
            assert events[1]["cursor"].split(":")[1] != old_cursor.split(":")[1]
        async with s.get(f"{a.url}/lp/live", params={"cursor": old_cursor, "timeout": "0"}) as r:
            body = await r.json()
        assert body["messages"][0]["type"] == "gap"
        assert body["messages"][0]["reason"] == "epoch"
        assert [m["data"] for m in body["messages"][1:]] == [3, 4, 5]
    for node in (a, b):
        assert "Traceback" not in node.log


async def test_node_listens_only_to_channels_with_local_subscribers(
    nodes: Nodes,
    redis_server: RedisServer,
) -> None:
    a, b = nodes
    watch = redis_server.client()

    def listeners(channel: str) -> int:
        return dict(watch.pubsub_numsub(f"pushserver:0:{channel}"))[
            f"pushserver:0:{channel}".encode()
        ]

    async def listeners_become(channel: str, n: int) -> None:
        await wait_until(
            lambda: asyncio.to_thread(lambda: listeners(channel) == n),
            f"{n} nodes listening to {channel}",
        )

    async with aiohttp.ClientSession() as s:
        await publish(s, a.url, "quiet", "nobody listens")
        assert watch.pubsub_channels() == []
        on_a = Subscriber(s, a.url, "stream", "alpha")
        await on_a.connect()
        await wait_for_subscribers(s, a.url, "alpha", 1)
        assert listeners("alpha") == 1
        on_b = Subscriber(s, b.url, "sse", "alpha,beta")
        await on_b.connect()
        await wait_for_subscribers(s, b.url, "beta", 1)
        assert (listeners("alpha"), listeners("beta")) == (2, 1)
        assert sorted(watch.pubsub_channels()) == [b"pushserver:0:alpha", b"pushserver:0:beta"]
        await on_a.close()
        await listeners_become("alpha", 1)
        await on_b.close()
        await listeners_become("beta", 0)
        await listeners_become("alpha", 0)
        assert watch.pubsub_channels() == []
    watch.close()


def ask(writer: asyncio.StreamWriter, channel: str, cursor: str) -> None:
    """A keep-alive long-poll of `channel` from `cursor` on a raw connection, written to the
    socket now: the same head each time but for the cursor, so the node serves a repeat from
    the poll it kept."""
    query = f"timeout=10&cursor={quote(cursor, safe='')}"
    writer.write(f"GET /lp/{channel}?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) != b"\r\n":
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return status, json.loads(await reader.readexactly(length))


@dataclasses.dataclass
class KeptOnB:
    """Two nodes on one Redis deployment, B's connections to it through `proxies`, and a raw
    keep-alive connection to B whose long-poll of `channel` B kept after its last answer (at
    `cursor`)."""

    a: ServerProcess
    b: ServerProcess
    proxies: Sequence[TcpProxy]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    channel: str
    cursor: str

    @contextlib.asynccontextmanager
    async def held(self, s: aiohttp.ClientSession) -> AsyncIterator[None]:
        """B's connections through the proxies held while the block runs; at its end B has read
        what the block asked on the kept connection (B answers a request sent after it), then
        they resume."""
        for proxy in self.proxies:
            proxy.hold()
        try:
            yield
            async with s.get(f"{self.b.url}/none") as r:
                assert r.status == 404
        finally:
            for proxy in self.proxies:
                proxy.resume()

    def ask(self, cursor: str) -> None:
        ask(self.writer, self.channel, cursor)

    async def answer(self) -> dict[str, Any]:
        status, body = await answer(self.reader)
        assert status == 200, body
        return body


@contextlib.asynccontextmanager
async def kept_poll(
    s: aiohttp.ClientSession,
    a: ServerProcess,
    b: ServerProcess,
    proxies: Sequence[TcpProxy],
    channel: str,
) -> AsyncIterator[KeptOnB]:
    """`KeptOnB` for `channel`, after A published 1 and 2: B answered the poll with 1 at
    once, then held it, answered it with 2 when notified, and kept it for the next."""
    start = await head_cursor(s, a.url, channel)
    await publish(s, a.url, channel, 1)
    reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
    try:
        ask(writer, channel, start)
        status, body = await answer(reader)
        assert (status, [m["id"] for m in body["messages"]]) == (200, [1])
        ask(writer, channel, body["cursor"])  # held, then answered: kept for the next
        await wait_for_subscribers(s, b.url, channel, 1)
        await publish(s, a.url, channel, 2)
        status, body = await answer(reader)
        assert (status, [m["id"] for m in body["messages"]]) == (200, [2])
        yield KeptOnB(a, b, proxies, reader, writer, channel, body["cursor"])
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def kept_on_b(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
    s: aiohttp.ClientSession,
    channel: str,
) -> AsyncIterator[KeptOnB]:
    """`kept_poll` on one Redis, B's one connection string through a proxy."""
    async with TcpProxy(redis_server.port) as proxy:
        a = server_factory(*node_args(redis_server))
        b = await asyncio.to_thread(  # the proxy runs in this loop while B connects through it
            server_factory, "--redis", f"redis://127.0.0.1:{proxy.port}/0"
        )
        async with kept_poll(s, a, b, [proxy], channel) as kept:
            yield kept


async def test_a_kept_poll_asked_from_a_cursor_this_node_has_not_seen_yet_reads_redis(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """Behind a load balancer a node's kept connection carries re-polls whose cursor another
    node gave, ahead of what this node has had notified. The poll it kept answers only cursors
    it can judge; this one is served as a new poll, which reads Redis, not refused
    `bad_cursor`. B's Redis connections pass a proxy held while A publishes and B is asked, so
    B learns of the messages only from Redis, after; the next message reaches the poll."""
    async with (
        aiohttp.ClientSession() as s,
        kept_on_b(redis_server, server_factory, s, "kept") as kept,
    ):
        a = kept.a
        async with kept.held(s):
            for n in (3, 4):
                await publish(s, a.url, "kept", n)
            async with s.get(f"{a.url}/lp/kept", params={"cursor": kept.cursor}) as r:
                ahead = (await r.json())["cursor"]
            kept.ask(ahead)
        await publish(s, a.url, "kept", 5)
        body = await kept.answer()
        assert [(m["id"], m["data"]) for m in body["messages"]] == [(5, 5)]
