"""Client-frame readers for the held WebSocket, compared: the `websockets` sans-I/O protocol
(what `pushserver.wire.websocket` runs on), `wsproto`, and the server's `ClientReader`; plus
the server's RSS per idle held WebSocket.

`python -m pushserver_bench.wsparsers` (wsproto rows need `pip install wsproto`). Per object:
tracemalloc over 10,000 readers. CPU: process time per frame fed one at a time, and for one
64 KiB frame fed one byte per call (a client trickling it one byte per write).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from websockets.protocol import Protocol, Side, State

from pushserver.wire.websocket import MAX_FRAME, ClientReader
from pushserver_measure.machine import describe

from .budgets import idle_rss
from .context import Bench
from .said import bench_line, server_line

MASK = b"\x01\x02\x03\x04"
OBJECTS = 10_000
FRAMES = 20_000


def masked(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0xFE, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0xFF, n)
    mask = MASK * (n // 4 + 1)
    return head + MASK + bytes(a ^ b for a, b in zip(payload, mask, strict=False))


def websockets_reader() -> Callable[[bytes], Any]:
    protocol = Protocol(Side.SERVER, state=State.OPEN, max_size=(None, MAX_FRAME))

    def feed(data: bytes) -> Any:
        protocol.receive_data(data)
        protocol.events_received()
        return protocol.data_to_send()

    return feed


def wsproto_reader() -> Callable[[bytes], Any]:
    from wsproto import Connection, ConnectionType
    from wsproto.events import Ping

    conn = Connection(ConnectionType.SERVER)

    def feed(data: bytes) -> Any:
        conn.receive_data(data)
        return [conn.send(e.response()) for e in conn.events() if isinstance(e, Ping)]

    return feed


def server_reader() -> Callable[[bytes], Any]:
    return ClientReader().feed


def bytes_per_object(new: Callable[[], object]) -> float:
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [new() for _ in range(OBJECTS)]
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    return used / OBJECTS


def cpu_us(new: Callable[[], Callable[[bytes], Any]], frame: bytes) -> float:
    feed = new()
    started = time.process_time()
    for _ in range(FRAMES):
        feed(frame)
    return (time.process_time() - started) / FRAMES * 1e6


def trickle_s(new: Callable[[], Callable[[bytes], Any]]) -> float:
    feed = new()
    frame = masked(0x2, os.urandom(MAX_FRAME))
    started = time.process_time()
    for i in range(len(frame)):
        feed(frame[i : i + 1])
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=10_000, help="held WebSockets for RSS")
    args = parser.parse_args()
    print(f"machine: {describe()}\nbench: {bench_line()}")
    readers = [("websockets Protocol", websockets_reader)]
    try:
        import wsproto  # noqa: F401

        readers.append(("wsproto Connection", wsproto_reader))
    except ImportError:
        print("wsproto: not installed, its row is left out")
    readers.append(("server ClientReader", server_reader))
    ping, text = masked(0x9, b"hello"), masked(0x1, b"x" * 100)
    print("reader                bytes/object  ping->pong us  100-byte text us  64 KiB by bytes s")
    for name, new in readers:
        print(
            f"{name:20}  {bytes_per_object(new):12,.0f}  {cpu_us(new, ping):13.1f}  "
            f"{cpu_us(new, text):16.1f}  {trickle_s(new):17.2f}"
        )
    bench = Bench(machine=describe())
    with bench.server("--heartbeat", "3600") as url:
        per_conn, held = asyncio.run(idle_rss(url, args.idle, "ws"))
    print(f"server RSS per idle held WebSocket: {per_conn / 1024:.2f} KB ({held:,} held)")
    for said in bench.said:
        print(f"server: {server_line(said)}")


if __name__ == "__main__":
    main()
