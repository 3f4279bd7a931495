"""Silent connections that fill --max-connections: they give way to new ones once past
--head-grace, the operators' routes keep a reserve meanwhile, and the rest is refused."""

from __future__ import annotations

import asyncio
import contextlib
import re

import aiohttp

from ...abuse import stats

LIMIT = 1000
OPENED = 1100
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")


async def _silent(port: int, n: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection from one of `ADDRESSES` that sends nothing."""
    return await asyncio.open_connection(
        "127.0.0.1", port, local_addr=(ADDRESSES[n % len(ADDRESSES)], 0)
    )


async def _told(reader: asyncio.StreamReader) -> bytes:
    """What the server sends a silent connection before it closes it (empty: closed
    without a word)."""
    with contextlib.suppress(ConnectionError):
        return await asyncio.wait_for(reader.read(), 30)
    return b""


async def _get_until_served(http: aiohttp.ClientSession, url: str) -> tuple[int, list[int]]:
    """GET `url` on new connections until it is served; its status and the refusals before."""
    refusals: list[int] = []
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        async with http.get(url) as resp:
            await resp.read()
            if resp.status == 200:
                return resp.status, refusals
            refusals.append(resp.status)
        assert asyncio.get_running_loop().time() < deadline, f"still refused: {refusals[-5:]}"
        await asyncio.sleep(0.05)


async def test_silent_connections_give_way_and_health_checks_are_never_refused(server_factory):
    srv = server_factory("--max-connections", str(LIMIT), "--request-timeout", "60")
    silent = [await _silent(srv.port, n) for n in range(OPENED)]
    connector = aiohttp.TCPConnector(force_close=True)  # a new connection per request
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.get(f"{srv.url}/healthz") as resp:  # on the reserve, at once
            assert resp.status == 200
        async with http.get(f"{srv.url}/stats") as resp:
            assert resp.status == 200
            held = await resp.json()
        assert held["connections"]["head"] <= LIMIT + 16
        # Refused on the reserve while every silent one is younger than the grace; served as
        # soon as the oldest is past it and gives way.
        status, refusals = await _get_until_served(http, f"{srv.url}/lp/door?timeout=0")
        assert status == 200 and set(refusals) <= {503}
        async with http.get(f"{srv.url}/healthz") as resp:
            assert resp.status == 200
    oldest = await _told(silent[0][0])
    assert oldest.startswith(b"HTTP/1.1 503 ") and b'"over_capacity"' in oldest
    last = await stats(srv.url)
    assert last["limits_hit"]["max_connections"] >= OPENED - LIMIT - 16
    assert last["connections"]["head"] <= LIMIT + 16
    for _, writer in silent:
        writer.close()


async def _poll(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> bytes:
    """One long-poll on a kept-alive connection: its answer's status line."""
    writer.write(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head)
    assert length is not None
    await reader.readexactly(int(length[1]))
    return head.partition(b"\r\n")[0]


async def test_a_newcomer_takes_the_place_of_a_silent_head_not_of_a_resting_poll(
    server_factory,
):
    """A kept-alive connection just answered (resting until its re-poll) outlives a silent
    connection past the grace when a newcomer needs room."""
    srv = server_factory("--max-connections", "2", "--head-grace", "0.5")
    silent = await _silent(srv.port, 0)
    kept = await _silent(srv.port, 1)
    # Held past the grace of the silent one, which it outlives: answered, it rests, younger.
    assert await _poll(*kept, "/lp/rest?timeout=0.6") == b"HTTP/1.1 200 OK"
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/lp/new?timeout=0") as resp:
        assert resp.status == 200
    assert (await _told(silent[0])).startswith(b"HTTP/1.1 503 ")
    assert await _poll(*kept, "/lp/rest?timeout=0") == b"HTTP/1.1 200 OK"
    for _, writer in (silent, kept):
        writer.close()
