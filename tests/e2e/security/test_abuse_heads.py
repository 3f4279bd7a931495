"""Request heads that never finish: bounded in size, counted against the connection limits."""

from __future__ import annotations

import asyncio
import contextlib
import re

import aiohttp
import pytest

from ...abuse import RSS_SLACK, settled_rss, stats, wait_for_stats

HEADER = b"X-Filler-%d: " + b"a" * 8000 + b"\r\n"
CONNECTIONS = 500


async def _long_head(port: int) -> asyncio.StreamWriter:
    """127 headers of 8,000 bytes and no blank line after them; returns once the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(HEADER % n for n in range(127))
    with contextlib.suppress(ConnectionError):
        writer.write(head)
        await writer.drain()
        await reader.read()
    return writer


async def _heads_gone(url: str) -> dict:
    """/stats once no unfinished head is counted (refusals meanwhile are expected)."""
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/stats") as resp:
            if resp.status == 200:
                current = await resp.json()
                if current["connections"]["head"] == 0:
                    return current
        assert asyncio.get_running_loop().time() < deadline, "heads still counted"
        await asyncio.sleep(0.1)


async def test_unfinished_heads_are_bounded_and_memory_returns(server_factory):
    srv = server_factory()
    base = await settled_rss(srv.url)
    tasks = [asyncio.create_task(_long_head(srv.port)) for _ in range(CONNECTIONS)]
    done, pending = await asyncio.wait(tasks, timeout=30)
    held = await stats(srv.url)
    print(
        f"{CONNECTIONS} unfinished 1 MB heads: RSS {base >> 20} -> {held['rss_bytes'] >> 20} MB, "
        f"{len(done)} closed by the server"
    )
    for task in pending:
        task.cancel()
    assert not pending, "the server kept unfinished heads over the bound"
    assert held["limits_hit"]["max_head_bytes"] == CONNECTIONS
    assert held["rss_bytes"] - base < 100 << 20
    for task in done:
        task.result().close()
    after = await wait_for_stats(srv.url, lambda s: s["connections"]["total"] == 0)
    print(f"after they closed: RSS {after['rss_bytes'] >> 20} MB")
    assert after["rss_bytes"] - base < RSS_SLACK


@pytest.mark.parametrize(
    ("setting", "path", "status", "limit"),
    [
        ("--max-connections", "/lp/news?timeout=0", 503, "max_connections"),
        ("--max-connections-per-ip", "/stream/news", 429, "max_connections_per_ip"),
    ],
)
async def test_unfinished_heads_count_against_connection_limits(
    server_factory, setting, path, status, limit
):
    """Two connections that send nothing fill a limit of 2 until they close."""
    srv = server_factory(setting, "2")
    silent = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(2)]
    async with aiohttp.ClientSession() as http:
        async with http.get(srv.url + path) as resp:
            assert resp.status == status
            assert (await resp.json())["error"] in ("over_capacity", "too_many_connections")
        for _, writer in silent:
            writer.close()
        current = await _heads_gone(srv.url)
        assert current["limits_hit"][limit] >= 1  # the polls of /stats meanwhile may count too
        async with http.get(srv.url + path) as resp:
            assert resp.status == 200


async def _answered_and_idle(
    port: int, n: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that made one request, had its answer, and is kept alive."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /lp/idle%d?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n" % n)
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head)
    assert length is not None
    await reader.readexactly(int(length[1]))
    return reader, writer


async def test_kept_alive_connections_make_room_for_new_ones(server_factory):
    """Three kept-alive connections waiting for a request fill --max-connections 3 as
    unfinished heads; a fourth connection closes the one that waited longest and is served."""
    srv = server_factory("--max-connections", "3")
    idle = [await _answered_and_idle(srv.port, n) for n in range(3)]
    held = await stats(srv.url)  # on the oldest's place: it is closed to make room
    assert held["connections"]["idle"] == 2  # the other two; /stats's own is busy
    assert await idle[0][0].read() == b""  # closed by the server, nothing more sent
    for reader, writer in idle[1:]:
        writer.write(b"GET /lp/again?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()


async def test_kept_alive_connections_count_against_the_per_address_limit(server_factory):
    """Three kept-alive connections from one address fill --max-connections-per-ip 3: a
    fourth from it is refused at once; when one closes, a new one is served."""
    srv = server_factory("--max-connections-per-ip", "3")
    idle = [await _answered_and_idle(srv.port, n) for n in range(3)]
    async with aiohttp.ClientSession() as http:
        async with http.get(srv.url + "/lp/news?timeout=0") as resp:
            assert (resp.status, (await resp.json())["error"]) == (429, "too_many_connections")
        idle.pop()[1].close()
        deadline = asyncio.get_running_loop().time() + 20
        while True:  # the close is seen by the server a moment later
            async with http.get(srv.url + "/lp/news?timeout=0") as resp:
                if resp.status == 200:
                    break
            assert asyncio.get_running_loop().time() < deadline, "still refused after a close"
            await asyncio.sleep(0.05)
    for _, writer in idle:
        writer.close()
