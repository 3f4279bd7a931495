"""Subscribing to channels nobody publishes to leaves no lasting state; channels are bounded;
the idle sweep never holds up delivery."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from pushserver.broker.memory import SWEEP_SLICE, MemoryBroker
from pushserver.core.broker import Item
from pushserver.core.positions import Cursor
from pushserver.core.subscription import Bound, Start, Waiter

from ...abuse import reset, stats, wait_for_stats
from ...inprocess import get, in_process
from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401

WIDE = ",".join(f"new-{n}" for n in range(64))
WS_HEADERS = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


class FuturePoll(Waiter):
    """A long-poll whose answer a test awaits."""

    def __init__(self, start: Start, bound: Bound) -> None:
        super().__init__(start, bound)
        self.future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def resolve(self, body: bytes) -> None:
        if not self.future.done():
            self.future.set_result(body)


async def _get(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, orjson.loads(await resp.read())


async def test_subscribing_to_new_channels_leaves_nothing_behind(server_factory):
    """History TTL is the default 300 s: the channels must go with their subscribers."""
    srv = server_factory()
    for n in range(5):
        status, _ = await _get(f"{srv.url}/lp/{WIDE.replace('new-', f'r{n}-')}?timeout=0")
        assert status == 200
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{srv.url}/lp/{WIDE}?timeout=0.2") as resp:
            assert resp.status == 200
        async with http.get(f"{srv.url}/stream/{WIDE}") as held:
            assert held.status == 200
            await wait_for_stats(srv.url, lambda s: s["connections"]["stream"] == 1)
            assert (await stats(srv.url))["channels"] == 64
    after = await wait_for_stats(srv.url, lambda s: s["connections"]["total"] == 0)
    assert after["channels"] == 0


async def test_cursor_of_an_unpublished_channel_still_works(server_factory):
    """It was dropped and comes back; the first message is delivered to it, with no gap."""
    srv = server_factory()
    _, first = await _get(f"{srv.url}/lp/quiet?timeout=0")
    assert (await stats(srv.url))["channels"] == 0
    async with aiohttp.ClientSession() as http:
        poll = asyncio.create_task(_get(f"{srv.url}/lp/quiet?timeout=20&cursor={first['cursor']}"))
        await wait_for_stats(srv.url, lambda s: s["connections"]["longpoll"] == 1)
        async with http.post(f"{srv.url}/pub/quiet", json="hello") as resp:
            assert resp.status == 201
    status, body = await poll
    assert status == 200
    assert [(m.get("type"), m.get("id")) for m in body["messages"]] == [(None, 1)]
    status, again = await _get(f"{srv.url}/lp/quiet?timeout=0&cursor={first['cursor']}")
    assert [m.get("id") for m in again["messages"]] == [1]


async def test_channel_count_is_bounded(server_factory):
    srv = server_factory("--max-channels", "64")
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/stream/{WIDE}") as held:
        assert held.status == 200
        status, body = await _get(f"{srv.url}/lp/other?timeout=0")
        assert (status, body["error"]) == (503, "over_capacity")
        status, _ = await _get(f"{srv.url}/lp/new-3?timeout=0")
        assert status == 200, "channels already held stay open to subscribers"
        assert (await stats(srv.url))["limits_hit"] == {"max_channels": 1}
    await wait_for_stats(srv.url, lambda s: s["channels"] == 0)
    status, _ = await _get(f"{srv.url}/lp/other?timeout=0")
    assert status == 200


async def test_redis_subscribe_writes_no_keys(redis_server: RedisServer, server_factory):
    srv = server_factory("--redis", redis_server.url)
    for n in range(4):
        status, body = await _get(f"{srv.url}/lp/{WIDE.replace('new-', f'k{n}-')}?timeout=0")
        assert status == 200
    client = redis_server.client()
    # Only the database's one generation key, whatever the number of channels subscribed to.
    assert client.keys("*") == [b"pushserver:generation"]
    _, first = await _get(f"{srv.url}/lp/quiet?timeout=0")
    async with aiohttp.ClientSession() as http, http.post(f"{srv.url}/pub/quiet", json=1) as resp:
        assert resp.status == 201
    status, body = await _get(f"{srv.url}/lp/quiet?timeout=5&cursor={first['cursor']}")
    assert status == 200
    assert [(m.get("type"), m.get("id")) for m in body["messages"]] == [(None, 1)]
    assert client.ttl("pushserver:m:quiet") > 0


async def test_sweep_runs_in_slices_and_delivery_goes_on():
    """200,000 idle channels are swept while a bystander is delivered to. The delivery time is
    printed, not asserted; the sweep must give the loop back between its slices."""
    async with in_process(max_channels=1_000_000, sweep_interval=3600) as (state, _, _port):
        hub = state.hub
        broker = hub.broker
        assert isinstance(broker, MemoryBroker)
        for n in range(200_000):
            broker.history.load(f"idle-{n}", "e1", 1)  # started, nothing buffered, nobody held
        bystander = (await hub.open(["by"], {}))[0]
        turns = 0
        stop = False

        async def ticker() -> None:
            nonlocal turns
            while not stop:
                turns += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        sweep = asyncio.create_task(broker.sweep())
        await asyncio.sleep(0)
        waits = []
        while not sweep.done():
            poll = FuturePoll(
                Start((bystander,), Cursor(by=bystander.sent_position), "-"), Bound(100, 1 << 15)
            )
            hub.add_waiter(poll)
            sent = time.perf_counter()
            hub.publish_now([Item("by", b"1")])
            await poll.future
            waits.append(time.perf_counter() - sent)
            hub.remove_waiter(poll)
        stop = True
        await ticking
        dropped = sweep.result()
    waits.sort()
    print(
        f"sweep of 200,000: {len(waits)} deliveries meanwhile, median "
        f"{waits[len(waits) // 2] * 1000:.1f} ms, worst {waits[-1] * 1000:.1f} ms"
    )
    assert dropped == 200_000
    assert len(waits) > 1, "no delivery while the sweep ran"
    assert turns >= 200_000 // SWEEP_SLICE - 1, "the sweep did not yield between slices"


async def test_aborted_redis_subscribes_log_no_error(redis_server: RedisServer, server_factory):
    """Clients that reset their connection while the node reads their channels from Redis."""
    srv = server_factory("--redis", redis_server.url)
    for n in range(20):
        for kind in ("lp", "stream", "sse", "ws"):
            names = WIDE.replace("new-", f"a{n}{kind}-")
            _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            headers = WS_HEADERS if kind == "ws" else ""
            writer.write(get(f"/{kind}/{names}?timeout=5", headers=headers))
            await writer.drain()
            reset(writer)
    await wait_for_stats(srv.url, lambda s: s["connections"]["total"] == 0)
    status, _ = await _get(f"{srv.url}/lp/{WIDE}?timeout=0")
    assert status == 200
    assert "ERROR" not in srv.log and "Traceback" not in srv.log, srv.log[-3000:]
