"""Connection floods and churn leave nothing behind: connections, channels and memory return to
their baseline, and the server keeps answering.

The churn runs for CHURN_SECONDS (env PUSHSERVER_CHURN_SECONDS, default 20); docs/security.md
gives the minute-long run.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time

import aiohttp
import orjson

from pushserver.core.tokens import mint

from ...abuse import RSS_SLACK, answers_normally, reset, settled_rss, wait_for_stats

FLOOD = 5000
CONCURRENCY = 400
CHURN_SECONDS = float(os.environ.get("PUSHSERVER_CHURN_SECONDS", "20"))
CHURN_WORKERS = 40
SECRET = "churn-secret-" + "x" * 40
CHURN_TOKEN = mint(["churn.*"], 3600, SECRET)

HOST = b"Host: flood\r\n"
WS_UPGRADE = (
    b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


async def _misbehave(port: int, n: int) -> None:
    """One abusive connection; the kind of abuse rotates with `n`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    kind = n % 6
    try:
        if kind == 1:
            writer.write(b"GET /stream/flood HTTP/1.1\r\nHo")
        elif kind == 2:
            writer.write(b"GET /stream/flood.%d HTTP/1.1\r\n%b\r\n" % (n % 50, HOST))
            await reader.readuntil(b"\r\n\r\n")
        elif kind == 3:
            writer.write(b"GET /lp/flood?timeout=30 HTTP/1.1\r\n%b\r\n" % HOST)
        elif kind == 4:
            writer.write(b"POST /pub/flood HTTP/1.1\r\n%bContent-Length: 1000\r\n\r\n{" % HOST)
        elif kind == 5:
            writer.write(b"GET /ws/flood HTTP/1.1\r\n%b%b\r\n" % (HOST, WS_UPGRADE))
            await reader.readuntil(b"\r\n\r\n")
        await writer.drain()
    finally:
        reset(writer)


async def test_connection_flood_leaves_nothing_behind(server_factory):
    srv = server_factory("--heartbeat", "1")
    await answers_normally(srv.url, "warmup")
    baseline = await settled_rss(srv.url)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(n: int) -> None:
        async with gate:
            await _misbehave(srv.port, n)

    results = await asyncio.gather(*(one(n) for n in range(FLOOD)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) < FLOOD // 100, failed[:5]
    await answers_normally(srv.url, "after")
    settled = await wait_for_stats(
        srv.url,
        lambda s: s["connections"]["total"] == 0 and s["rss_bytes"] <= baseline + RSS_SLACK,
    )
    assert settled["disconnects"].get("client", 0) > 0
    assert "Traceback" not in srv.log


async def _subscribe_once(http: aiohttp.ClientSession, url: str, n: int) -> None:
    """A subscriber on a channel of its own gets one message, then leaves (or vanishes)."""
    target = f"churn.{n}?token={CHURN_TOKEN}"
    kind = ("lp", "stream", "sse", "ws")[n % 4]
    publish = http.post(f"{url}/pub/churn.{n}", json=n)
    if kind == "lp":
        async with http.get(f"{url}/lp/{target}&timeout=0") as resp:
            cursor = (await resp.json())["cursor"]
        async with publish as resp:
            assert resp.status == 201
        async with http.get(f"{url}/lp/{target}&cursor={cursor}&timeout=5") as resp:
            messages = (await resp.json())["messages"]
        # A channel idle past the sweep may be dropped and come back in a new epoch: then a gap
        # comes first. The message itself is never lost.
        assert [m["data"] for m in messages if "type" not in m] == [n]
    elif kind == "ws":
        async with http.ws_connect(f"{url}/ws/{target}") as ws:
            async with publish as resp:
                assert resp.status == 201
            assert orjson.loads((await ws.receive()).data)["data"] == n
    else:
        async with http.get(f"{url}/{kind}/{target}") as resp:
            await resp.content.readline()
            async with publish as resp_pub:
                assert resp_pub.status == 201
            while not (line := await resp.content.readline()).startswith((b"{", b"data:")):
                pass
            assert b'"data":%d' % n in line
            if n % 8 == 1:
                resp.connection.transport.abort()


async def test_subscriber_churn_leaks_nothing(server_factory):
    """Subscribers hold tokens, so the expiry index is churned through as well.

    The server collects cyclic garbage at Python's default thresholds here, so what stays after
    the churn is a leak and not garbage waiting for a raised GC threshold; a first round of churn
    brings the allocator to its working size before the baseline is taken.
    """
    srv = server_factory(
        "--heartbeat",
        "1",
        "--history-ttl",
        "3",
        "--sweep-interval",
        "0.5",
        "--subscribe-secret",
        SECRET,
        "--gc-threshold",
        "700,10,10",
    )
    await answers_normally(srv.url, "churn.warmup", CHURN_TOKEN)
    counter = itertools.count()

    async def churn(seconds: float) -> int:
        deadline = time.monotonic() + seconds

        async def worker() -> int:
            done = 0
            async with aiohttp.ClientSession() as http:
                while time.monotonic() < deadline:
                    async with asyncio.timeout(15):
                        await _subscribe_once(http, srv.url, next(counter))
                    done += 1
            return done

        return sum(await asyncio.gather(*(worker() for _ in range(CHURN_WORKERS))))

    def idle(s: dict) -> bool:
        return s["connections"]["total"] == 0 and s["channels"] == 0

    await churn(CHURN_SECONDS / 2)
    baseline = await wait_for_stats(srv.url, idle)
    total = await churn(CHURN_SECONDS / 2)
    assert total > CHURN_WORKERS
    settled = await wait_for_stats(
        srv.url, lambda s: idle(s) and s["rss_bytes"] <= baseline["rss_bytes"] + RSS_SLACK
    )
    assert settled["messages_in"] >= baseline["messages_in"] + total
    await answers_normally(srv.url, "churn.after", CHURN_TOKEN)
