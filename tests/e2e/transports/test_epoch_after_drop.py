"""A channel dropped when idle, after its history expired, starts a new epoch with its next
message: a cursor from before its first epoch gets an `epoch` gap, on every transport, while one
taken after the drop resumes without one. The memory broker, against a real server."""

from __future__ import annotations

import asyncio

import aiohttp

from ...wire import TRANSPORTS, Subscriber, publish_batch, take
from .test_core_transports import head_cursor


async def test_a_cursor_from_before_a_dropped_epoch_is_told_it_was_lost(server_factory):
    srv = server_factory("--history-ttl", "1", "--sweep-interval", "0.5", "--heartbeat", "1")
    async with aiohttp.ClientSession() as s:
        before = await head_cursor(s, srv.url, "news")
        await publish_batch(s, srv.url, [{"channel": "news", "data": n} for n in range(3)])
        deadline = asyncio.get_running_loop().time() + 20
        while True:  # its history expires, then the idle sweep drops it
            async with s.get(f"{srv.url}/channels/news") as r:
                if r.status == 404:
                    break
            assert asyncio.get_running_loop().time() < deadline, "news was never dropped"
            await asyncio.sleep(0.05)
        after = await head_cursor(s, srv.url, "news")
        await publish_batch(s, srv.url, [{"channel": "news", "data": n} for n in (3, 4)])
        for transport in TRANSPORTS:
            sub = Subscriber(s, srv.url, transport, "news", before)
            await sub.connect()
            gap, *messages = await take(sub, 3)
            await sub.close()
            assert (gap["type"], gap["reason"], gap["from"], gap["to"]) == ("gap", "epoch", 1, 0)
            assert [(m["id"], m["data"]) for m in messages] == [(1, 3), (2, 4)], transport
        async with s.get(f"{srv.url}/lp/news", params={"cursor": after, "timeout": "0"}) as r:
            assert [m["data"] for m in (await r.json())["messages"]] == [3, 4]
