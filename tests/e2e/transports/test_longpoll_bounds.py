"""Bounded long-poll answers: `?limit=`, the server's caps, `"more"` and the cursor of a cut."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from pushserver.config import ConfigError, parse

from ...wire import publish, publish_batch, wait_for_subscribers
from .test_core_transports import head_cursor


async def poll(s: aiohttp.ClientSession, url: str, **params: str) -> dict[str, Any]:
    async with s.get(url, params={"timeout": "0", **params}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def drain(s: aiohttp.ClientSession, url: str, cursor: str, limit: str) -> list[dict]:
    """Poll from `cursor` until an answer says nothing more is waiting."""
    events: list[dict] = []
    while True:
        body = await poll(s, url, cursor=cursor, limit=limit)
        assert len(body["messages"]) <= int(limit)
        events += body["messages"]
        cursor = body["cursor"]
        if body["messages"]:
            assert cursor == body["messages"][-1]["cursor"]
        if not body.get("more"):
            return events


async def test_limit_pages_a_backlog_once_in_order(server_factory):
    server = server_factory("--longpoll-max-messages", "12")
    url = f"{server.url}/lp/paged"
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "paged")
        await publish_batch(s, server.url, [{"channel": "paged", "data": i} for i in range(30)])
        first = await poll(s, url, cursor=cursor, limit="10")
        assert [m["data"] for m in first["messages"]] == list(range(10))
        assert first["more"] is True
        assert first["cursor"] == first["messages"][-1]["cursor"]
        rest = await drain(s, url, first["cursor"], "10")
        assert [m["data"] for m in rest] == list(range(10, 30))
        # No limit, or one above the cap: the server's cap.
        capped = await poll(s, url, cursor=cursor, limit="500")
        assert len(capped["messages"]) == 12 and capped["more"] is True
        assert len((await poll(s, url, cursor=cursor))["messages"]) == 12
        for bad in ("0", "-1", "x"):
            async with s.get(url, params={"limit": bad, "timeout": "0"}) as r:
                assert r.status == 400
                assert (await r.json())["error"] == "bad_parameter"


async def test_byte_budget_and_one_event_always_goes(server_factory):
    server = server_factory("--longpoll-max-bytes", "2000")
    url = f"{server.url}/lp/big"
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "big")
        items = [{"channel": "big", "data": "x" * 600} for _ in range(5)]
        items.append({"channel": "big", "data": "y" * 5000})
        await publish_batch(s, server.url, items)
        body = await poll(s, url, cursor=cursor)
        assert len(body["messages"]) == 2 and body["more"] is True
        events = await drain(s, url, cursor, "100")
        assert [len(m["data"]) for m in events] == [600] * 5 + [5000]


async def test_gap_goes_with_the_message_after_it(server_factory):
    server = server_factory("--history-size", "5")
    url = f"{server.url}/lp/lossy"
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "lossy")
        await publish(s, server.url, "lossy", 0)
        first = await poll(s, url, cursor=cursor)
        await publish_batch(s, server.url, [{"channel": "lossy", "data": i} for i in range(1, 10)])
        body = await poll(s, url, cursor=first["cursor"], limit="1")
        gap, message = body["messages"]
        assert (gap["type"], gap["from"], gap["to"]) == ("gap", 2, 5)
        assert message["id"] == 6 and body["more"] is True
        assert body["cursor"] == message["cursor"]


async def test_multi_channel_cut_resumes_each_channel_exactly(server):
    url = f"{server.url}/lp/ma,mb"
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "ma,mb")
        items = [{"channel": "ma" if i % 3 else "mb", "data": i} for i in range(20)]
        await publish_batch(s, server.url, items)
        events = await drain(s, url, cursor, "3")
        assert [m["data"] for m in events] == list(range(20))
        # JSONP answers are cut the same way.
        async with s.get(url, params={"cursor": cursor, "limit": "4", "callback": "cb"}) as r:
            text = await r.text()
        body = json.loads(text[len("cb(") : -2])
        assert [m["data"] for m in body["messages"]] == [0, 1, 2, 3] and body["more"] is True


async def test_live_batch_to_held_waiters_respects_each_limit(server_factory):
    """One batch of 1,000: a waiter with limit 10 (direct and JSONP) gets its own cut answer;
    the waiters without a limit share the whole batch."""
    server = server_factory("--longpoll-max-messages", "1000", "--longpoll-max-bytes", "1000000")
    url = f"{server.url}/lp/burst"
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "burst")

        async def held(**params: str) -> str:
            query = {"cursor": cursor, "timeout": "30", **params}
            async with s.get(url, params=query) as r:
                return await r.text()

        polls = [
            asyncio.create_task(held()),
            asyncio.create_task(held()),
            asyncio.create_task(held(limit="10")),
            asyncio.create_task(held(limit="10", callback="cb")),
        ]
        await wait_for_subscribers(s, server.url, "burst", len(polls))
        await publish_batch(s, server.url, [{"channel": "burst", "data": i} for i in range(1000)])
        whole_a, whole_b, cut, jsonp = await asyncio.gather(*polls)
    assert whole_a == whole_b
    whole = json.loads(whole_a)
    assert [m["data"] for m in whole["messages"]] == list(range(1000))
    assert "more" not in whole
    for body in (json.loads(cut), json.loads(jsonp[len("cb(") : -2])):
        assert [m["data"] for m in body["messages"]] == list(range(10))
        assert body["more"] is True
        assert body["cursor"] == body["messages"][9]["cursor"]


@pytest.mark.parametrize("flag", ["--longpoll-max-messages", "--longpoll-max-bytes"])
def test_caps_must_be_positive(flag):
    with pytest.raises(ConfigError):
        parse([flag, "0"])
