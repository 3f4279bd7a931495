"""Helpers for the abuse tests: raw connections that misbehave, and polling /stats."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable

import aiohttp

RSS_SLACK = 30 << 20
"""Allocator slack tolerated when RSS should be back to its baseline."""


def reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0), as a vanished mobile client does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def stats(url: str) -> dict:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/stats") as resp:
        assert resp.status == 200
        return await resp.json()


async def wait_for_stats(url: str, ok: Callable[[dict], bool], seconds: float = 60) -> dict:
    """Poll /stats until `ok` holds; fails with the last figures after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        current = await stats(url)
        if ok(current):
            return current
        assert time.monotonic() < deadline, f"server did not settle: {current}"
        await asyncio.sleep(0.25)


async def settled_rss(url: str) -> int:
    """RSS once the server is idle: the baseline the abuse tests compare against."""
    current = await wait_for_stats(url, lambda s: s["connections"]["total"] == 0)
    return current["rss_bytes"]


async def answers_normally(url: str, channel: str, token: str = "") -> None:
    """A publish reaches a long-poll that resumes from the cursor before it."""
    auth = f"&token={token}" if token else ""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/lp/{channel}?timeout=0{auth}") as resp:
            assert resp.status == 200
            cursor = (await resp.json())["cursor"]
        async with http.post(f"{url}/pub/{channel}", json={"ok": True}) as resp:
            assert resp.status == 201
        async with http.get(f"{url}/lp/{channel}?cursor={cursor}&timeout=5{auth}") as resp:
            body = await resp.json()
    assert [m["data"] for m in body["messages"] if "type" not in m] == [{"ok": True}]
