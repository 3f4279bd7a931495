"""Test-side subscribers that speak the wire protocol directly, one per transport.

They are deliberately independent of the pushclient library so the server is tested on its own.
Each yields decoded events (envelopes and control events) in the order the server sent them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

TRANSPORTS = ("longpoll", "stream", "sse", "ws")
PATHS = {"longpoll": "lp", "stream": "stream", "sse": "sse", "ws": "ws"}


class Subscriber:
    """One subscription on one transport; `cursor` is the last cursor seen."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base: str,
        transport: str,
        channels: str,
        cursor: str | None = None,
        **params: Any,
    ) -> None:
        self.session = session
        self.base = base
        self.transport = transport
        self.channels = channels
        self.cursor = cursor
        self.params = {k: str(v) for k, v in params.items()}
        self.response: aiohttp.ClientResponse | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.heartbeats = 0
        self.raw_lines: list[bytes] = []

    def url(self) -> str:
        return f"{self.base}/{PATHS[self.transport]}/{self.channels}"

    def query(self) -> dict[str, str]:
        q = dict(self.params)
        if self.cursor is not None:
            q["cursor"] = self.cursor
        return q

    async def connect(self) -> None:
        """Open a held connection (streams); long-poll connects per poll."""
        if self.transport in ("stream", "sse"):
            self.response = await self.session.get(self.url(), params=self.query())
            assert self.response.status == 200, await self.response.text()
        elif self.transport == "ws":
            self.ws = await self.session.ws_connect(self.url(), params=self.query())

    async def close(self) -> None:
        if self.response is not None:
            self.response.close()
            self.response = None
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    def _track(self, event: dict[str, Any]) -> dict[str, Any]:
        if "cursor" in event:
            self.cursor = event["cursor"]
        return event

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        if self.transport == "longpoll":
            async for e in self._longpoll():
                yield e
        elif self.transport == "stream":
            async for e in self._stream():
                yield e
        elif self.transport == "sse":
            async for e in self._sse():
                yield e
        else:
            async for e in self._ws():
                yield e

    async def _longpoll(self) -> AsyncIterator[dict[str, Any]]:
        q = {"timeout": "5", **self.query()}
        while True:
            async with self.session.get(self.url(), params=q) as resp:
                assert resp.status == 200, await resp.text()
                body = await resp.json()
            for event in body["messages"]:
                yield self._track(event)
            self.cursor = body["cursor"]
            q = {"timeout": "5", **self.query()}

    async def _stream(self) -> AsyncIterator[dict[str, Any]]:
        assert self.response is not None
        while True:
            line = await self.response.content.readline()
            if not line:
                return
            self.raw_lines.append(line)
            if not line.strip():
                self.heartbeats += 1
                continue
            yield self._track(json.loads(line))

    async def _sse(self) -> AsyncIterator[dict[str, Any]]:
        assert self.response is not None
        event_id = None
        while True:
            line = await self.response.content.readline()
            if not line:
                return
            self.raw_lines.append(line)
            text = line.decode().rstrip("\n")
            if text.startswith(":"):
                self.heartbeats += 1
            elif text.startswith("id: "):
                event_id = text[4:]
            elif text.startswith("data: "):
                event = json.loads(text[6:])
                if event_id is not None:
                    assert event.get("cursor") == event_id
                    event_id = None
                yield self._track(event)

    async def _ws(self) -> AsyncIterator[dict[str, Any]]:
        assert self.ws is not None
        async for msg in self.ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                yield self._track(json.loads(msg.data))
            elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.ERROR):
                return


async def take(sub: Subscriber, n: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The next `n` events, or fail after `timeout` seconds with what arrived."""
    got: list[dict[str, Any]] = []

    async def run() -> None:
        async for event in sub.events():
            got.append(event)
            if len(got) >= n:
                return

    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        raise AssertionError(f"{sub.transport}: got {len(got)} of {n} events: {got}") from None
    return got


async def publish(
    session: aiohttp.ClientSession, base: str, channel: str, data: Any, **headers: str
) -> dict[str, Any]:
    async with session.post(f"{base}/pub/{channel}", json=data, headers=headers or None) as r:
        assert r.status == 201, await r.text()
        return await r.json()


async def publish_batch(
    session: aiohttp.ClientSession, base: str, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    async with session.post(f"{base}/pub", json=items) as r:
        assert r.status == 201, await r.text()
        return await r.json()


async def wait_for_subscribers(
    session: aiohttp.ClientSession, base: str, channel: str, n: int, timeout: float = 20.0
) -> None:
    """Poll GET /channels until `n` subscribers are held (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = None
    while loop.time() < deadline:
        async with session.get(f"{base}/channels/{channel}") as r:
            if r.status == 200:
                seen = (await r.json())["subscribers"]
                if seen >= n:
                    return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{channel}: {seen} subscribers, expected {n}")


async def streaming(session: aiohttp.ClientSession, base: str, channel: str) -> list[Subscriber]:
    """A subscriber to `channel` at `base` on every streaming transport, connected and counted
    by the server before it returns."""
    subs = [Subscriber(session, base, t, channel) for t in ("stream", "sse", "ws")]
    for sub in subs:
        await sub.connect()
    await wait_for_subscribers(session, base, channel, len(subs))
    return subs


async def wait_for_stats(
    session: aiohttp.ClientSession,
    base: str,
    ready: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 20.0,
) -> dict[str, Any]:
    """Poll GET /stats until `ready(stats)` holds; fail naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        async with session.get(f"{base}/stats") as r:
            stats = await r.json()
        if ready(stats):
            return stats
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {timeout}s: {stats}")
        await asyncio.sleep(0.05)


WS_MASK = b"\x01\x02\x03\x04"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
WS_DEADLINE = 20.0


def masked(opcode: int, payload: bytes, fin: bool = True, width: int = 0, rsv: int = 0) -> bytes:
    """A WebSocket frame as a client sends it: masked, as RFC 6455 requires. `width` forces a
    2- or 8-byte length field (not minimal for a short payload); `rsv` sets the reserved bits."""
    first = (0x80 if fin else 0) | rsv << 4 | opcode
    n = len(payload)
    if width == 8 or n >= 1 << 16:
        head = struct.pack("!BBQ", first, 0x80 | 127, n)
    elif width == 2 or n >= 126:
        head = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        head = struct.pack("!BB", first, 0x80 | n)
    mask = WS_MASK * (n // 4 + 1)
    return head + WS_MASK + bytes(a ^ b for a, b in zip(payload, mask, strict=False))


def ws_upgrade(key: str = "dGhlIHNhbXBsZSBub25jZQ==", version: str = "13") -> str:
    """The headers of a WebSocket handshake request."""
    return (
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: {version}\r\n"
    )


async def open_ws(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw WebSocket connection, handshake done."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n{ws_upgrade(key)}\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WS_DEADLINE)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next server frame (unmasked)."""
    first, length = await asyncio.wait_for(reader.readexactly(2), WS_DEADLINE)
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    return first & 0x0F, await asyncio.wait_for(reader.readexactly(length), WS_DEADLINE)
