"""Each transport delivers every message once, in order, with the envelope fields."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from ...wire import (
    TRANSPORTS,
    Subscriber,
    publish,
    publish_batch,
    streaming,
    take,
    wait_for_subscribers,
)


async def head_cursor(session: aiohttp.ClientSession, base: str, channels: str) -> str:
    async with session.get(f"{base}/lp/{channels}", params={"timeout": "0"}) as r:
        assert r.status == 200
        body = await r.json()
    assert body["messages"] == []
    return body["cursor"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_in_order_exactly_once_with_envelope(server, transport):
    async with aiohttp.ClientSession() as s:
        sub = Subscriber(s, server.url, transport, "news")
        await sub.connect()
        if transport != "longpoll":
            await wait_for_subscribers(s, server.url, "news", 1)
        else:
            sub.cursor = await head_cursor(s, server.url, "news")
        reader = asyncio.create_task(take(sub, 50))
        results = [await publish(s, server.url, "news", {"n": n}) for n in range(50)]
        events = await reader
        await sub.close()
    assert [e["data"] for e in events] == [{"n": n} for n in range(50)]
    assert [e["id"] for e in events] == [r["id"] for r in results] == list(range(1, 51))
    for event, result in zip(events, results, strict=True):
        assert set(event) == {"channel", "id", "ts", "data", "cursor"}
        assert event["channel"] == "news"
        assert event["ts"] == result["ts"]
        assert event["cursor"].startswith("news:") and event["cursor"].endswith(f":{event['id']}")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_multi_channel_subscription(server, transport):
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "a,b,c")
        sub = Subscriber(s, server.url, transport, "a,b,c", cursor=cursor)
        await sub.connect()
        reader = asyncio.create_task(take(sub, 30))
        items = [{"channel": "abc"[n % 3], "data": n} for n in range(30)]
        await publish_batch(s, server.url, items[:15])
        for item in items[15:]:
            await publish(s, server.url, item["channel"], item["data"])
        await publish(s, server.url, "elsewhere", "not for this subscription")
        events = await reader
        await sub.close()
    assert [e["data"] for e in events] == list(range(30))
    assert [e["channel"] for e in events] == [i["channel"] for i in items]
    # the cursor after each message names every channel at its position after that message
    last = events[-1]["cursor"].split(",")
    assert [p.split(":")[0] for p in last] == ["a", "b", "c"]
    assert [int(p.rsplit(":", 1)[1]) for p in last] == [10, 10, 10]
    seen = {"a": 0, "b": 0, "c": 0}
    for e in events:
        seen[e["channel"]] = e["id"]
        parts = {p.split(":")[0]: int(p.rsplit(":", 1)[1]) for p in e["cursor"].split(",")}
        assert parts == seen


BODIES = [
    ("héllo\nworld".encode(), None),
    (b'{\n  "pretty": [1,\n 2]\n}', "application/json"),
    (b'{"a": 1}', "Application/Vnd.Api+JSON; charset=utf-8"),  # any +json type is JSON
]
"""Publish bodies and their Content-Type (None: none sent)."""


async def test_text_and_json_bodies(server):
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "t")
        for data, content_type in BODIES:
            headers = {} if content_type is None else {"Content-Type": content_type}
            async with s.post(f"{server.url}/pub/t", data=data, headers=headers) as r:
                assert r.status == 201
        sub = Subscriber(s, server.url, "stream", "t,t", cursor=cursor)
        await sub.connect()
        events = await take(sub, len(BODIES))
        await sub.close()
    assert events[0]["data"] == "héllo\nworld"
    assert events[1]["data"] == {"pretty": [1, 2]}
    assert events[2]["data"] == {"a": 1}  # any +json type is JSON
    assert events[2]["cursor"].count(":") == 2  # a repeated channel counts once


async def test_history_parameter(server):
    async with aiohttp.ClientSession() as s:
        for n in range(5):
            await publish(s, server.url, "h", n)
        for transport in TRANSPORTS:
            sub = Subscriber(s, server.url, transport, "h", history=3)
            await sub.connect()
            events = await take(sub, 3)
            await sub.close()
            assert [e["data"] for e in events] == [2, 3, 4], transport


async def test_publish_reports_subscriber_count(server):
    async with aiohttp.ClientSession() as s:
        subs = await streaming(s, server.url, "count")
        result = await publish(s, server.url, "count", "x")
        assert result["subscribers"] == 3
        for sub in subs:
            await sub.close()
