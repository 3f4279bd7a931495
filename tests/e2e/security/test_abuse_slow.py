"""Clients that never read and clients that never finish their request are cut off, while the
others keep receiving everything."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import aiohttp
import orjson

from ...abuse import stats, wait_for_stats

BIG = 60_000
MESSAGES = 60


async def _read_stream(resp: aiohttp.ClientResponse, count: int) -> list[int]:
    ids = []
    while len(ids) < count:
        line = await resp.content.readline()
        assert line, f"stream ended after {len(ids)} messages"
        if line.strip():
            ids.append(orjson.loads(line)["id"])
    return ids


def _never_reading_socket(port: int, path: bytes) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET %b HTTP/1.1\r\nHost: slow\r\n\r\n" % path)
    return sock


async def test_never_reading_subscriber_is_cut_off(server_factory):
    srv = server_factory("--heartbeat", "1", "--max-buffer-bytes", "65536")
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/stream/big") as reader:
        stalled = [_never_reading_socket(srv.port, b"/stream/big") for _ in range(3)]
        await wait_for_stats(srv.url, lambda s: s["connections"]["stream"] == 4)
        received = asyncio.create_task(_read_stream(reader, MESSAGES))
        payload = "x" * BIG
        for _ in range(MESSAGES):
            async with http.post(f"{srv.url}/pub/big", data=payload) as resp:
                assert resp.status == 201
        async with asyncio.timeout(60):
            ids = await received
    assert ids == list(range(1, MESSAGES + 1))
    settled = await wait_for_stats(srv.url, lambda s: s["connections"]["stream"] == 0)
    assert settled["disconnects"]["slow"] == 3
    assert settled["limits_hit"]["max_buffer_bytes"] == 3
    for sock in stalled:
        sock.close()


async def _trickle(port: int, cut: asyncio.Event, head: bytes) -> None:
    """Start a request, then add to its last header a byte at a time until the server hangs up."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        for _ in range(5000):
            writer.write(b"a")
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    if await reader.read(1024) == b"":
                        break
    except ConnectionError:
        pass
    finally:
        writer.close()
    cut.set()


async def _silent(port: int, cut: asyncio.Event) -> None:
    """Connect and send nothing at all."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with contextlib.suppress(ConnectionError):
        await reader.read()
    writer.close()
    cut.set()


async def test_slowloris_is_cut_off_and_others_keep_receiving(server_factory):
    srv = server_factory("--heartbeat", "0.5", "--request-timeout", "2")
    head = b"GET /stream/news HTTP/1.1\r\nHost: slow\r\nX-Padding: "
    cuts = [asyncio.Event() for _ in range(6)]
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/stream/news") as reader:
        tasks = [asyncio.create_task(_trickle(srv.port, cut, head)) for cut in cuts[:4]]
        tasks += [asyncio.create_task(_silent(srv.port, cut)) for cut in cuts[4:]]
        received = asyncio.create_task(_read_stream(reader, 20))
        n = 0
        while not all(cut.is_set() for cut in cuts):
            n += 1
            assert n < 600, "slow clients were never cut off"
            async with http.post(f"{srv.url}/pub/news", json=n) as resp:
                assert resp.status == 201
            await asyncio.sleep(0.05)
        while not received.done():
            n += 1
            async with http.post(f"{srv.url}/pub/news", json=n) as resp:
                assert resp.status == 201
            await asyncio.sleep(0.05)
        ids = await received
        await asyncio.gather(*tasks)
        assert ids == list(range(1, 21))
        held = await stats(srv.url)
    assert held["connections"]["stream"] == 1, "the well-behaved stream outlived the timeout"
