"""The Python client across broken connections: random cuts, a restarted server, a dead link.

Every test runs on each transport; the client must deliver every message once, in order, or
say what was lost.
"""

from __future__ import annotations

import asyncio
import random

import aiohttp
import pytest
from pushclient import TRANSPORT_NAMES, Backoff, Gap, Message, PushClient, Subscription

from ...tcpproxy import TcpProxy
from ...wire import wait_for_stats

FAST = Backoff(initial=0.02, maximum=0.2)
MESSAGES = 5000
BATCH = 100
WAIT = 30.0  # deadline for any single expected event


async def _forward(subscription: Subscription, queue: asyncio.Queue) -> None:
    async for item in subscription:
        await queue.put(item)


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_every_message_once_in_order_through_cuts(server_factory, transport):
    server = server_factory("--history-size", "10000", "--heartbeat", "2")
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    channel = f"cuts-{transport}"
    received: asyncio.Queue = asyncio.Queue()
    proxy = TcpProxy(server.port, cut_after=lambda: rng.randint(1, 2000))
    async with (
        proxy,
        PushClient(server.url) as publisher,
        PushClient(proxy.url, heartbeat=2, backoff=FAST, poll_timeout=10) as client,
        client.subscribe(channel, transport=transport, history=MESSAGES) as subscription,
    ):
        forwarder = asyncio.create_task(_forward(subscription, received))
        try:
            for start in range(0, MESSAGES, BATCH):
                # Batch by batch, so a long-poll answer stays small enough to get through.
                await publisher.publish_many((channel, n) for n in range(start, start + BATCH))
                for n in range(start, start + BATCH):
                    item = await asyncio.wait_for(received.get(), WAIT)
                    assert isinstance(item, Message), (seed, item)
                    assert (item.id, item.data) == (n + 1, n), seed
            await publisher.publish(channel, "end")
            last = await asyncio.wait_for(received.get(), WAIT)
            assert (last.id, last.data) == (MESSAGES + 1, "end"), seed
            assert subscription.cursor == last.cursor
        finally:
            forwarder.cancel()
            await asyncio.gather(forwarder, return_exceptions=True)
    assert proxy.cuts >= 20, seed
    assert proxy.cuts_mid_line > 0, seed


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_surfaces_epoch_gap_after_restart(server_factory, transport):
    server = server_factory("--heartbeat", "1")
    async with PushClient(server.url, backoff=FAST) as client:
        await client.publish("restarted", "before")
        async with client.subscribe("restarted", transport=transport, history=1) as subscription:
            before = await asyncio.wait_for(anext(subscription), WAIT)
            assert isinstance(before, Message) and before.data == "before"
            await asyncio.to_thread(server.restart)
            await client.publish("restarted", "after")
            gap = await asyncio.wait_for(anext(subscription), WAIT)
            assert isinstance(gap, Gap), gap
            assert (gap.channel, gap.reason) == ("restarted", "epoch")
            after = await asyncio.wait_for(anext(subscription), WAIT)
            assert isinstance(after, Message), after
            assert (after.id, after.data) == (1, "after")
            assert subscription.cursor == after.cursor


@pytest.mark.parametrize("transport", TRANSPORT_NAMES)
async def test_pushclient_reconnects_when_the_link_goes_silent(server_factory, transport):
    server = server_factory("--heartbeat", "1")
    async with (
        TcpProxy(server.port) as proxy,
        PushClient(server.url) as publisher,
        PushClient(proxy.url, backoff=FAST, poll_timeout=1) as client,
    ):
        await publisher.publish("silent", "one")
        async with client.subscribe("silent", transport=transport, history=1) as subscription:
            one = await asyncio.wait_for(anext(subscription), WAIT)
            assert isinstance(one, Message) and one.data == "one"
            assert client.heartbeat == 1.0  # read from the server's /stats
            pending = asyncio.create_task(anext(subscription))
            async with aiohttp.ClientSession() as http:
                await wait_for_stats(
                    http, server.url, lambda s: s["connections"][transport] == 1, "held"
                )
            opened = proxy.connections
            proxy.stall()  # nothing more gets through, yet nothing is closed
            await publisher.publish("silent", "two")
            two = await asyncio.wait_for(pending, WAIT)
            assert isinstance(two, Message) and (two.id, two.data) == (2, "two")
            assert proxy.connections > opened


@pytest.mark.parametrize("transport", ["stream", "sse", "ws"])
async def test_pushclient_drop_before_the_first_message_loses_nothing(server_factory, transport):
    """A subscription made without a cursor still has one to resume from before any message."""
    server = server_factory("--heartbeat", "1")
    async with (
        TcpProxy(server.port) as proxy,
        PushClient(server.url) as publisher,
        PushClient(proxy.url, backoff=FAST) as client,
        client.subscribe("fresh", transport=transport) as subscription,
    ):
        first = asyncio.create_task(anext(subscription))
        async with aiohttp.ClientSession() as http:
            await wait_for_stats(
                http, server.url, lambda s: s["connections"][transport] == 1, "held"
            )
        proxy.stall()  # the only connection dies before any message came through it
        await publisher.publish("fresh", "published while cut off")
        message = await asyncio.wait_for(first, WAIT)
    assert isinstance(message, Message) and message.data == "published while cut off"
