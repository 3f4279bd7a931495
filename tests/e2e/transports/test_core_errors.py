"""Every row of the error table, as JSON with its status; bad input never disturbs others."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from ...inprocess import read_response
from ...wire import Subscriber, publish, take, wait_for_subscribers
from .test_core_transports import head_cursor

BAD_SUBSCRIBES = [
    ("/lp/bad%20name", 400, "bad_channel"),
    ("/stream/" + "x" * 129, 400, "bad_channel"),
    ("/sse/a,,b", 400, "bad_channel"),
    ("/lp/" + ",".join(f"c{n}" for n in range(65)), 400, "too_many_channels"),
    ("/lp/news?cursor=garbage", 400, "bad_cursor"),
    ("/lp/news?cursor=news:abc:-1", 400, "bad_cursor"),
    ("/lp/news?cursor=news:ab-c:1", 400, "bad_cursor"),
    ("/lp/news?cursor=news:abc:1,news:abc:2", 400, "bad_cursor"),
    ("/lp/news?cursor=news:u9c1f02ab:3", 400, "bad_cursor"),
    ("/lp/news?timeout=abc", 400, "bad_timeout"),
    ("/lp/news?timeout=-1", 400, "bad_timeout"),
    ("/lp/news?timeout=100000", 400, "bad_timeout"),
    ("/lp/news?history=-1", 400, "bad_history"),
    ("/lp/news?history=%205", 400, "bad_history"),
    ("/lp/news?history=%D9%A5", 400, "bad_history"),
    ("/lp/news?history=5_0", 400, "bad_history"),
    ("/stream/news?pad=%205", 400, "bad_parameter"),
    ("/stream/news?pad=1_0", 400, "bad_parameter"),
    ("/lp/news?timeout=%D9%A5", 400, "bad_timeout"),
    ("/lp/news?timeout=1_0", 400, "bad_timeout"),
    ("/lp/news?timeout=%201", 400, "bad_timeout"),
    ("/lp/news?timeout=nan", 400, "bad_timeout"),
    ("/stream/news?history=1000000", 400, "bad_history"),
    ("/stream/news?pad=1000000", 400, "bad_parameter"),
    ("/lp/news?history=" + "9" * 5000, 400, "bad_history"),
    ("/sse/news?pad=" + "9" * 5000, 400, "bad_parameter"),
    ("/lp/news?timeout=" + "9" * 5000, 400, "bad_timeout"),
    ("/lp/news?timeout=0&limit=0", 400, "bad_parameter"),
    ("/nowhere", 404, "not_found"),
    ("/channels/never-seen", 404, "not_found"),
]


@pytest.mark.parametrize(("path", "status", "code"), BAD_SUBSCRIBES)
async def test_bad_requests(shared_server, path, status, code):
    async with aiohttp.ClientSession() as s, s.get(shared_server.url + path) as r:
        assert r.status == status
        assert r.headers["Content-Type"].startswith("application/json")
        body = await r.json()
    assert body["error"] == code and body["message"]


GOOD_PARAMETERS = [
    "limit=" + "9" * 5000,  # above the server's cap is the cap
    "limit=2147483649",
    "history=" + "0" * 5000 + "1",
    "timeout=0000000000",
    "timeout=0.0000000000",
]


@pytest.mark.parametrize("query", GOOD_PARAMETERS)
async def test_long_numbers_in_range_are_taken(shared_server, query):
    """However many digits a number has, it is read as its value (int() refuses 4,300+)."""
    url = f"{shared_server.url}/lp/long-numbers?{query}" + ("&timeout=0" * ("timeout" not in query))
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["messages"] == []


@pytest.mark.parametrize("path", ["lp", "stream", "sse", "ws"])
async def test_cursor_beyond_last_id_is_refused_before_any_byte(shared_server, path):
    url = shared_server.url
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, url, "future")
        epoch = cursor.split(":")[1]
        async with s.get(f"{url}/{path}/future", params={"cursor": f"future:{epoch}:5"}) as r:
            assert r.status == 400
            assert (await r.json())["error"] == "bad_cursor"


BAD_PUBLISHES = [
    ("/pub/bad%20name", b"x", {}, 400, "bad_channel"),
    ("/pub/j", b"{not json", {"Content-Type": "application/json"}, 400, "bad_json"),
    ("/pub/j", b"hello", {"Content-Type": "application/ld+json"}, 400, "bad_json"),
    ("/pub/t", b"\xff\xfe", {}, 400, "bad_utf8"),
    ("/pub/big", b"x" * 65537, {}, 413, "too_large"),
    ("/pub", b"{}", {}, 400, "bad_batch"),
    ("/pub", b"[]", {}, 400, "bad_batch"),
    ("/pub", b'[{"channel": "a"}]', {}, 400, "bad_batch"),
    ("/pub", b'[{"channel": "a b", "data": 1}]', {}, 400, "bad_channel"),
    ("/pub", b"nope", {}, 400, "bad_json"),
]


@pytest.mark.parametrize(("path", "body", "headers", "status", "code"), BAD_PUBLISHES)
async def test_bad_publishes(shared_server, path, body, headers, status, code):
    async with aiohttp.ClientSession() as s:
        async with s.post(shared_server.url + path, data=body, headers=headers) as r:
            assert r.status == status
            assert (await r.json())["error"] == code
        # nothing was published by a refused batch
        async with s.get(f"{shared_server.url}/channels/a") as r:
            assert r.status == 404


async def test_method_not_allowed(server):
    async with aiohttp.ClientSession() as s, s.delete(f"{server.url}/pub/news") as r:
        assert r.status == 405
        assert (await r.json())["error"] == "method_not_allowed"


async def test_publish_key(server_factory):
    srv = server_factory("--publish-key", "s3cret")
    async with aiohttp.ClientSession() as s:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            async with s.post(f"{srv.url}/pub/k", data=b"x", headers=headers) as r:
                assert r.status == 401
                assert (await r.json())["error"] == "unauthorized"
            async with s.get(f"{srv.url}/stats", headers=headers) as r:
                assert r.status == 401
        ok = {"Authorization": "Bearer s3cret"}
        result = await publish(s, srv.url, "k", "x", **ok)
        assert result["id"] == 1
        async with s.get(f"{srv.url}/healthz") as r:
            assert r.status == 200 and await r.text() == "ok"


async def test_undecodable_bearer_key_is_a_401_without_a_traceback(server_factory):
    srv = server_factory("--publish-key", "s3cret")
    for path, method in (("/pub/k", "POST"), ("/stats", "GET"), ("/pub", "POST")):
        request = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n".encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(request + b"Authorization: Bearer \xff\r\n\r\nx")
        head, _ = await read_response(reader)
        writer.close()
        assert head.split(b" ", 2)[1] == b"401", head
    assert "Traceback" not in srv.log and "ERROR" not in srv.log, srv.log[-2000:]


async def test_connection_limits(server_factory):
    srv = server_factory("--max-connections", "2", "--max-connections-per-ip", "1")
    async with aiohttp.ClientSession() as s:
        first = Subscriber(s, srv.url, "stream", "lim")
        await first.connect()
        await wait_for_subscribers(s, srv.url, "lim", 1)
        async with s.get(f"{srv.url}/sse/lim") as r:
            assert r.status == 429
            assert (await r.json())["error"] == "too_many_connections"
        await first.close()
    srv2 = server_factory("--max-connections", "1")
    async with aiohttp.ClientSession() as s:
        first = Subscriber(s, srv2.url, "stream", "lim")
        await first.connect()
        await wait_for_subscribers(s, srv2.url, "lim", 1)
        async with s.get(f"{srv2.url}/lp/lim") as r:
            assert r.status == 503
            assert r.headers["Retry-After"] == "1"
            assert (await r.json())["error"] == "over_capacity"
        async with s.get(f"{srv2.url}/stats") as r:
            assert (await r.json())["limits_hit"] == {"max_connections": 1}
        await first.close()


async def test_bad_input_does_not_disturb_subscribers(server):
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, server.url, "calm")
        sub = Subscriber(s, server.url, "stream", "calm", cursor=cursor)
        await sub.connect()
        reader = asyncio.create_task(take(sub, 2))
        await publish(s, server.url, "calm", 1)
        for path, body, headers, _, _ in BAD_PUBLISHES:
            async with s.post(server.url + path, data=body, headers=headers) as r:
                assert r.status >= 400
        await publish(s, server.url, "calm", 2)
        events = await reader
        await sub.close()
    assert [e["data"] for e in events] == [1, 2]


async def test_idle_channels_are_dropped(server_factory):
    srv = server_factory("--history-ttl", "0.2", "--sweep-interval", "0.1")
    async with aiohttp.ClientSession() as s:
        for n in range(20):
            await publish(s, srv.url, f"oneshot-{n}", n)
        sub = Subscriber(s, srv.url, "stream", "kept")
        await sub.connect()
        await wait_for_subscribers(s, srv.url, "kept", 1)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:
            async with s.get(f"{srv.url}/stats") as r:
                channels = (await r.json())["channels"]
            if channels == 1:
                break
            assert loop.time() < deadline, f"{channels} channels still held"
            await asyncio.sleep(0.05)
        async with s.get(f"{srv.url}/channels/oneshot-3") as r:
            assert r.status == 404
        async with s.get(f"{srv.url}/channels/kept") as r:
            assert r.status == 200
        await sub.close()
