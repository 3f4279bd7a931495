"""Long-poll timeouts and JSONP, stream padding and heartbeats, slow consumers."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp

from ...wire import Subscriber, publish, take, wait_for_stats, wait_for_subscribers
from .test_core_transports import head_cursor


async def test_longpoll_timeout_answers_empty_with_cursor(server):
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "quiet")
        async with s.get(
            f"{server.url}/lp/quiet", params={"cursor": cursor, "timeout": "0.2"}
        ) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("application/json")
            body = await r.json()
    assert body == {"messages": [], "cursor": cursor}


async def test_longpoll_held_then_answered_by_publish(server):
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "held")
        poll = asyncio.create_task(
            s.get(f"{server.url}/lp/held", params={"cursor": cursor, "timeout": "30"})
        )
        await wait_for_subscribers(s, server.url, "held", 1)
        await publish(s, server.url, "held", "wake")
        async with await poll as r:
            body = await r.json()
    assert [m["data"] for m in body["messages"]] == ["wake"]
    assert body["cursor"] == body["messages"][0]["cursor"]


async def test_jsonp_wraps_the_body(server):
    async with aiohttp.ClientSession() as s:
        await publish(s, server.url, "j", {"x": 1})
        async with s.get(
            f"{server.url}/lp/j", params={"history": "1", "callback": "window.cb_1"}
        ) as r:
            assert r.headers["Content-Type"].startswith("application/javascript")
            text = await r.text()
        assert text.startswith("window.cb_1(") and text.endswith(");")
        body = json.loads(text[len("window.cb_1(") : -2])
        assert body["messages"][0]["data"] == {"x": 1}
        async with s.get(f"{server.url}/lp/j", params={"callback": "alert(1)//"}) as r:
            assert r.status == 400
            assert (await r.json())["error"] == "bad_parameter"
        async with s.get(  # an empty ?callback= is as if not given
            f"{server.url}/lp/j", params={"history": "1", "callback": ""}
        ) as r:
            assert r.headers["Content-Type"].startswith("application/json")
            assert (await r.json())["messages"][0]["data"] == {"x": 1}


async def test_jsonp_escapes_the_line_separators_old_scripts_cannot_hold(server):
    text = "a\u2028b\u2029c"
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{server.url}/pub/js", data=text.encode()) as r:
            assert r.status == 201
        async with s.get(f"{server.url}/lp/js", params={"history": "1", "callback": "cb"}) as r:
            raw = await r.read()
    assert "\u2028".encode() not in raw and "\u2029".encode() not in raw
    assert raw.startswith(b"cb(") and raw.endswith(b");")
    assert json.loads(raw[3:-2])["messages"][0]["data"] == text


async def test_stream_padding_and_heartbeats(server):
    """`server` runs with --heartbeat 1."""
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{server.url}/stream/hb", params={"pad": "2048"}) as r:
            assert r.headers["Content-Type"].startswith("application/x-ndjson")
            first = await r.content.readline()
            assert first == b" " * 2048 + b"\n"
            beats = [await r.content.readline() for _ in range(2)]
            assert beats == [b"\n", b"\n"]
        async with s.get(f"{server.url}/sse/hb", params={"pad": "16"}) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            assert await r.content.readline() == b":" + b" " * 16 + b"\n"
            assert await r.content.readline() == b"\n"
            assert (await r.content.readline()).startswith(b"id: hb:")  # where it starts
            assert await r.content.readline() == b"\n"
            assert await r.content.readline() == b":\n"  # heartbeat comment
        async with s.ws_connect(f"{server.url}/ws/hb", autoping=False) as ws:
            msg = await ws.receive(timeout=10)
            assert msg.type == aiohttp.WSMsgType.PING


async def test_many_subscribers_on_every_transport(server_factory):
    """100 subscribers per transport each receive all 1,000 messages, in order."""
    srv = server_factory("--history-size", "1000")
    per_transport, total = 100, 1000
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        cursor = await head_cursor(s, srv.url, "crowd")
        subs = [
            Subscriber(s, srv.url, t, "crowd", cursor=cursor)
            for t in ("longpoll", "stream", "sse", "ws")
            for _ in range(per_transport)
        ]
        await asyncio.gather(*(sub.connect() for sub in subs))
        readers = [asyncio.create_task(take(sub, total, timeout=120)) for sub in subs]
        for start in range(0, total, 50):
            items = [{"channel": "crowd", "data": n} for n in range(start, start + 50)]
            async with s.post(f"{srv.url}/pub", json=items) as r:
                assert r.status == 201
        results = await asyncio.gather(*readers)
        for sub in subs:
            await sub.close()
    for sub, events in zip(subs, results, strict=True):
        assert [e["data"] for e in events] == list(range(total)), sub.transport


async def test_slow_stream_subscriber_is_cut_off_others_continue(server_factory):
    srv = server_factory("--max-buffer-bytes", "65536", "--history-size", "1000")
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, srv.url, "slow")
        # The stalled subscriber: a raw socket with a tiny receive buffer that never reads.
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", srv.port))
        raw.sendall(b"GET /stream/slow HTTP/1.1\r\nHost: x\r\n\r\n")
        good = Subscriber(s, srv.url, "stream", "slow", cursor=cursor)
        await good.connect()
        await wait_for_subscribers(s, srv.url, "slow", 2)
        reading = asyncio.create_task(take(good, 400, timeout=60))
        payload = "x" * 32000
        for n in range(400):
            await publish(s, srv.url, "slow", {"n": n, "pad": payload})
        events = await reading
        assert [e["data"]["n"] for e in events] == list(range(400))
        stats = await wait_for_stats(
            s, srv.url, lambda st: st["disconnects"].get("slow") == 1, "slow disconnect"
        )
        assert stats["connections"]["stream"] == 1
        assert stats["rss_bytes"] < 200 * 1024 * 1024
        await good.close()
        raw.close()
