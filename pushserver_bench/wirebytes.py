"""Experiment 11: bytes on the wire per delivered message, compressed and not.

One subscriber per row, on a plain socket. Realistic messages (`ticker_data`: stock quotes of
about 100 bytes of JSON) are published one at a time, each once the subscriber has decoded the
one before, so each goes out in a write of its own, as pushes to a phone do. A row's figure is
what the server sent between the first message's arrival and the last's, per message: the
steady state, without the response head or the stream's opening. Every message is decoded
(chunked transfer, gzip, WebSocket frames, permessage-deflate), so a row whose bytes did not
carry every message fails. Long-poll: one answer carrying a backlog of `BACKLOG` messages,
head included. pushserver: NDJSON stream, SSE, compact SSE and WebSocket, each as it is and
compressed; nginx+nchan (`--target nchan`): its SSE, as it is.
"""

from __future__ import annotations

import asyncio
import base64
import os
import zlib
from typing import Any
from urllib.parse import urlsplit

import orjson

from pushserver_measure.http11 import Endpoint

from .client import BenchError, get_request, ticker_data
from .context import Bench, channel
from .table import Table
from .targets import Target
from .versus import reachable

MESSAGES = 200
BACKLOG = 20
MARK = b'"volume":'
"""In every message once (`ticker_data`): a message has arrived when its count grows."""
SYNC_TAIL = b"\x00\x00\xff\xff"
GZIP = {"Accept-Encoding": "gzip"}
WEBSOCKET = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
}
DEFLATE = {"Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits"}
COLUMNS = ["transport", "coding", "messages", "bytes per message", "of identity %"]


class Decoder:
    """What a subscriber was sent, decoded as it comes; `count` is how many messages so far."""

    def __init__(self, chunked: bool, gzip: bool, ws: bool, deflate: bool) -> None:
        self.chunked, self.ws = chunked, ws
        self.inflate = zlib.decompressobj(31 if gzip else -15) if gzip or deflate else None
        self.buf = b""
        self.count = 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            piece = self._ws() if self.ws else self._chunk() if self.chunked else self._plain()
            if piece is None:
                return
            self.count += piece.count(MARK)

    def _plain(self) -> bytes | None:
        piece, self.buf = self.buf, b""
        return self._inflated(piece) if piece else None

    def _chunk(self) -> bytes | None:
        line, crlf, rest = self.buf.partition(b"\r\n")
        if not crlf:
            return None
        size = int(line, 16)
        if len(rest) < size + 2:
            return None
        self.buf = rest[size + 2 :]
        return self._inflated(rest[:size])

    def _ws(self) -> bytes | None:
        if len(self.buf) < 2:
            return None
        first, size = self.buf[0], self.buf[1] & 0x7F
        start = 2 + {126: 2, 127: 8}.get(size, 0)
        if len(self.buf) < start:
            return None
        if size >= 126:
            size = int.from_bytes(self.buf[2:start], "big")
        if len(self.buf) < start + size:
            return None
        payload, self.buf = self.buf[start : start + size], self.buf[start + size :]
        if first & 0x40:  # RSV1: a compressed message
            assert self.inflate is not None
            return self.inflate.decompress(payload + SYNC_TAIL)
        return payload

    def _inflated(self, piece: bytes) -> bytes:
        return piece if self.inflate is None else self.inflate.decompress(piece)


async def held(target: Target, path: str, headers: dict[str, str], ws: bool) -> tuple[float, str]:
    """Bytes per message on one held subscription to `path`, and how it was coded."""
    name = path.rsplit("/", 1)[-1].split("?")[0]
    at = Endpoint.parse(target.sub)
    reader, writer = await asyncio.open_connection(at.host, at.port)
    publisher = await target.publisher()
    try:
        writer.write(get_request(path, headers))
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).lower()
        gzip = b"\r\ncontent-encoding: gzip" in head
        deflate = b"\r\nsec-websocket-extensions: permessage-deflate" in head
        decoder = Decoder(b"transfer-encoding: chunked" in head, gzip, ws, deflate)
        await target.wait_subscribed(name, 1)
        sent = 0
        for n in range(1, MESSAGES + 1):
            await publisher.send(target.publish(name, ticker_data()))
            while decoder.count < n:
                data = await asyncio.wait_for(reader.read(65536), 10)
                if not data:
                    raise BenchError(f"{path}: closed after {decoder.count} messages")
                decoder.feed(data)
                sent += len(data)
            if n == 1:
                first = sent
    finally:
        publisher.close()
        writer.close()
    coding = "gzip" if gzip else "permessage-deflate" if deflate else "identity"
    return (sent - first) / (MESSAGES - 1), coding


async def backlog(target: Target, gzip: bool) -> tuple[float, str]:
    """The bytes of one long-poll answer (head included) carrying `BACKLOG` messages."""
    name = channel("wb")
    at = Endpoint.parse(target.sub)
    reader, writer = await asyncio.open_connection(at.host, at.port)
    publisher = await target.publisher()
    try:
        writer.write(get_request(f"/lp/{name}?timeout=0"))
        cursor = (await _answer(reader))[1]["cursor"]
        for _ in range(BACKLOG):
            await publisher.send(target.publish(name, ticker_data()))
        writer.write(get_request(f"/lp/{name}?cursor={cursor}", GZIP if gzip else None))
        size, doc, coding = await _answer(reader)
    finally:
        publisher.close()
        writer.close()
    if len(doc["messages"]) != BACKLOG:
        raise BenchError(f"a backlog of {len(doc['messages'])}, not {BACKLOG}")
    return float(size), coding


async def _answer(reader: asyncio.StreamReader) -> tuple[int, Any, str]:
    """One whole answer: its size on the wire, its JSON, its coding."""
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).lower()
    length = int(head.split(b"\r\ncontent-length: ")[1].split(b"\r\n")[0])
    body = await asyncio.wait_for(reader.readexactly(length), 10)
    gzip = b"\r\ncontent-encoding: gzip" in head
    doc = orjson.loads(zlib.decompress(body, 31) if gzip else body)
    return len(head) + length, doc, "gzip" if gzip else "identity"


def rows(kind: str) -> list[tuple[str, str, dict[str, str], bool]]:
    """(transport, path query, request headers, is WebSocket) of each held row."""
    if kind != "pushserver":
        return [("sse", "", {"Accept": "text/event-stream"}, False)]
    key = {"Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
    out = []
    for coding in (False, True):
        extra = GZIP if coding else {}
        out += [
            ("stream", "", extra, False),
            ("sse", "", extra, False),
            ("sse compact", "?compact=1", extra, False),
            ("ws", "", {**WEBSOCKET, **key, **(DEFLATE if coding else {})}, True),
        ]
    return out


async def run(bench: Bench) -> list[Table]:
    with bench.server() as url:
        target = Target.of(bench.target, url, bench.pub_url, bench.sub_url)
        table = Table(11, f"bytes on the wire per delivered message: {target.kind}", COLUMNS)
        if not await reachable(target, table):
            return [table]
        table.notes += [
            f"{MESSAGES} stock quotes of about 100 bytes of JSON, each published once the last "
            "was decoded; bytes per message = what the server sent from the first message's "
            "arrival to the last's, over the messages in between; long-poll: one answer "
            f"carrying a backlog of {BACKLOG}, its head included",
        ]
        identity: dict[str, float] = {}
        for transport, query, headers, ws in rows(target.kind):
            name = channel("wb")
            if target.kind == "pushserver":
                path = f"/{'ws' if ws else transport.split()[0]}/{name}{query}"
            else:
                path = urlsplit(target.sub).path + name
            per, coding = await held(target, path, headers, ws)
            identity.setdefault(transport, per)
            table.add(transport, coding, MESSAGES, per, 100 * per / identity[transport])
        if target.kind == "pushserver":
            for gzip in (False, True):
                size, coding = await backlog(target, gzip)
                identity.setdefault("longpoll", size)
                ratio = 100 * size / identity["longpoll"]
                table.add(f"long-poll, backlog of {BACKLOG}", coding, BACKLOG, size, ratio)
    return [table]
