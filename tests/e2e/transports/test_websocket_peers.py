"""WebSocket peers beyond the case table: a client that pings and never reads is cut off
without holding back its channel, a client that never answers the server's close is dropped,
and an independent client library talks to the server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from typing import Any

import aiohttp
from websockets.asyncio.client import connect

from pushserver.core.tokens import mint

from ...wire import (
    CLOSE,
    PING,
    TEXT,
    WS_DEADLINE,
    Subscriber,
    masked,
    open_ws,
    publish,
    publish_batch,
    read_frame,
    wait_for_stats,
    wait_for_subscribers,
    ws_upgrade,
)

FLOOD_BOUND = 256 << 20
"""Bytes of pings the flooder sends at most; far more than it takes to be cut off."""
AFTER_CUT = 50
"""Messages published once the flooder is gone, so the bystander is seen to keep up."""


class Collector:
    """Each event a subscriber receives, with its delivery latency (receipt - publish time)."""

    def __init__(self, sub: Subscriber) -> None:
        self.sub = sub
        self.events: list[dict[str, Any]] = []
        self.latencies: list[float] = []
        self.target = 0
        self.reached = asyncio.Event()

    async def run(self) -> None:
        async for event in self.sub.events():
            self.latencies.append(time.time() - event["data"]["sent"])
            self.events.append(event)
            if self.target and len(self.events) >= self.target:
                self.reached.set()

    async def wait_for(self, n: int) -> None:
        self.target = n
        if len(self.events) >= n:
            return
        await asyncio.wait_for(self.reached.wait(), WS_DEADLINE)


def flood(port: int, path: str) -> int:
    """Send pings without ever reading the pongs, until the server drops the connection.

    Runs in a thread on a blocking socket, so the flood does not hold up the test's own loop.
    """
    batch = masked(PING, b"*" * 125) * 512
    sent = 0
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{ws_upgrade()}\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)  # one byte at a time: no frame is read by accident
        assert head.startswith(b"HTTP/1.1 101 ")
        with contextlib.suppress(ConnectionError):
            while sent < FLOOD_BOUND:
                sock.sendall(batch)
                sent += len(batch)
    return sent


async def test_a_pinger_that_never_reads_is_cut_and_a_bystander_gets_everything(server_factory):
    srv = server_factory("--heartbeat", "3600", "--max-buffer-bytes", "65536")
    async with aiohttp.ClientSession() as s:
        bystander = Subscriber(s, srv.url, "ws", "flood")
        await bystander.connect()
        collector = Collector(bystander)
        listening = asyncio.create_task(collector.run())
        flooding = asyncio.create_task(asyncio.to_thread(flood, srv.port, "/ws/flood"))
        await wait_for_subscribers(s, srv.url, "flood", 2)
        published = 0
        while not flooding.done() or published < AFTER_CUT:
            await publish(s, srv.url, "flood", {"n": published, "sent": time.time()})
            published += 1
        sent = await flooding
        assert sent < FLOOD_BOUND, "the flooder was never cut off"
        stats = await wait_for_stats(
            s, srv.url, lambda st: st["connections"]["ws"] == 1, "the flooder to be gone"
        )
        assert stats["limits_hit"]["max_buffer_bytes"] == 1
        await collector.wait_for(published)
        assert [e["data"]["n"] for e in collector.events] == list(range(published))
        print(
            f"\nflooder cut after {sent:,} bytes of pings; bystander got {published} messages, "
            f"worst latency {max(collector.latencies) * 1000:.1f} ms"
        )
        listening.cancel()
        await bystander.close()


async def test_the_websockets_library_gets_1000_messages_and_closes_cleanly(server):
    channel = "lib"
    async with aiohttp.ClientSession() as s, connect(f"ws://{server.url[7:]}/ws/{channel}") as ws:
        await wait_for_subscribers(s, server.url, channel, 1)
        await publish_batch(s, server.url, [{"channel": channel, "data": i} for i in range(1000)])
        got = [json.loads(await asyncio.wait_for(ws.recv(), WS_DEADLINE)) for _ in range(1000)]
        await ws.close(1000, "done")
    assert [e["data"] for e in got] == list(range(1000))
    assert ws.protocol.close_sent is not None and ws.protocol.close_sent.code == 1000
    assert ws.close_code == 1000, "the server answers the close with the same code"


async def test_a_client_that_ignores_the_server_close_gets_nothing_more_and_is_dropped(
    server_factory,
):
    secret = "close-secret-" + "x" * 40
    srv = server_factory("--heartbeat", "3600", "--subscribe-secret", secret)
    reader, writer = await open_ws(srv.port, f"/ws/quiet?token={mint(['quiet'], 1, secret)}")
    opcode, payload = await read_frame(reader)
    assert (opcode, json.loads(payload)) == (TEXT, {"type": "expired"})
    assert await read_frame(reader) == (CLOSE, b"\x03\xf0expired")
    async with aiohttp.ClientSession() as s:
        await publish(s, srv.url, "quiet", "after the close")
    # The client never sends its close: the server drops the connection on its own.
    assert await asyncio.wait_for(reader.read(), WS_DEADLINE) == b""
    writer.close()
