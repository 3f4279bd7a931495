"""A lean HTTP/1.1 and WebSocket client on asyncio protocols.

The bench must cost far less than the server it measures, so it speaks just enough HTTP itself:
no client library, and no per-message parsing unless latency is wanted. Counting deliveries is a
byte count per chunk: every event the server frames ends with `}` and its terminator, and a
chunk written by the fan-out always holds whole events.

A subscriber times a delivery by when its bytes arrived (`arrival`: the kernel's receive
timestamp), not when its process got round to reading them, so the latencies are the server's
even when the client is short of CPU. What a client can still add is a long-poll's re-poll sent
late: a message published between an answer's arrival and the next poll waited on the client,
and is counted (`Tally.late`). A `plain` subscriber instead times a read when `data_received` is
called, on the loop's own transport, as an independent client written with raw asyncio
protocols does (`arrival.open_subscriber`).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import time
import zlib
from array import array
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, cast
from urllib.parse import quote

import orjson

from pushserver_measure.http11 import (
    HEAD_END,
    NO_HEADERS,
    ConnectionClosed,
    Endpoint,
    Head,
    Responses,
    parse_head,
    request_bytes,
)

from .arrival import Timed, open_subscriber
from .runnable import Runnable

TRANSPORTS = ("stream", "sse", "ws", "longpoll")
CONNECT_CONCURRENCY = 100
HOST = "bench"
JSON = {"Content-Type": "application/json"}


class BenchError(Exception):
    """The server answered something the bench did not expect."""


def get_request(path: str, headers: dict[str, str] | None = None) -> bytes:
    return request_bytes("GET", HOST, path, headers=headers)


def publish_request(channel: str, data: bytes) -> bytes:
    return request_bytes("POST", HOST, f"/pub/{channel}", data, JSON)


def batch_request(channel: str, datas: Sequence[bytes]) -> bytes:
    prefix = b'{"channel":"%b","data":' % channel.encode()
    body = b"[" + b",".join(prefix + d + b"}" for d in datas) + b"]"
    return request_bytes("POST", HOST, "/pub", body, JSON)


def message_data(size: int = 100) -> bytes:
    """A JSON message of about `size` bytes carrying its send time (`t`, epoch seconds)."""
    stamp = orjson.dumps({"t": time.time(), "p": ""})
    return stamp[:-2] + b"x" * max(0, size - len(stamp)) + b'"}'


TICKERS = ("ACME", "GLOBX", "INITECH", "UMBRELLA", "HOOLI", "PIEDPIPER", "WAYNE", "STARK")
_TICKS = itertools.count()


def ticker_data() -> bytes:
    """A realistic JSON message of about 100 bytes (a stock quote, realistic field names and
    values that change from one message to the next) carrying its send time (`t`): what
    compression is measured on (the padding of `message_data` would compress to nothing)."""
    n = next(_TICKS)
    return orjson.dumps(
        {
            "t": time.time(),
            "symbol": TICKERS[n % len(TICKERS)],
            "bid": round(100 + (n * 37 % 1000) / 100, 2),
            "ask": round(100.05 + (n * 37 % 1000) / 100, 2),
            "volume": 1000 + n * 13 % 9000,
            "venue": "XNAS",
        }
    )


def _head(raw: bytes) -> Head:
    try:
        return parse_head(raw)
    except ConnectionClosed as exc:
        raise BenchError(str(exc)) from None


class Tally:
    """Deliveries counted across the subscribers of one process."""

    __slots__ = (
        "_target",
        "_waiter",
        "empty",
        "errors",
        "first",
        "last",
        "late",
        "latencies",
        "parse",
        "received",
        "runnable",
        "spans",
        "waits",
    )

    def __init__(self, parse: bool, runnable: Runnable | None = None) -> None:
        self.parse = parse
        self.received = 0
        self.first = 0.0
        self.last = 0.0
        self.latencies: list[float] = []
        self.late = 0
        """Messages published while a long-poll client sat on an answer, before it polled again
        (`stamp`'s `held`)."""
        self.waits = array("d")
        """Those messages' send times and the re-polls that fetched them, in pairs: whether a
        message waited on the client depends on when the server began answering it
        (`spans` of every process, `versus.waited_on_client`)."""
        self.spans: dict[float, list[float]] = {}
        """Each timed message's first and last arrival here, by its send time."""
        self.runnable = runnable
        """Samples of how busy this process was as it read (`runnable.Runnable`), if taken."""
        self.empty = 0
        """Long-poll answers without a message once one had arrived: polls timed out after a
        message had set them all polling together."""
        self.errors: list[str] = []
        self._target = 0
        self._waiter: asyncio.Future[None] | None = None

    def add(self, n: int, now: float) -> None:
        if not self.received:
            self.first = now
        self.received += n
        self.last = now
        if self.runnable is not None:
            self.runnable.counted(n)
        if self._waiter is not None and self.received >= self._target:
            if not self._waiter.done():
                self._waiter.set_result(None)
            self._waiter = None

    def envelope(self, raw: bytes | bytearray, now: float) -> int:
        """Parse one envelope (latency mode); returns its id, or -1 for a control event."""
        env = orjson.loads(raw)
        if "type" in env:
            return -1
        self.stamp(env["data"], now)
        return env["id"]

    def stamp(self, data: object, now: float, held: tuple[float, float] | None = None) -> None:
        """Record the latency of a message that carries its send time (`message_data`).

        `held`: from when a long-poll client's last answer arrived to when its next poll went
        out; a message published in between may have waited on the client (`waits`)."""
        if isinstance(data, dict) and "t" in data:
            sent = data["t"]
            self.latencies.append(now - sent)
            span = self.spans.get(sent)
            if span is None:
                self.spans[sent] = [now, now]
            elif now < span[0]:
                span[0] = now
            elif now > span[1]:
                span[1] = now
            if held is not None and held[0] < sent < held[1]:
                self.late += 1
                self.waits.append(sent)
                self.waits.append(held[1])

    def unstamped(self) -> float:
        """The time for a read that carried no receive timestamp: now, and an error, since
        such a latency includes the client's own delay."""
        if not any(e.startswith("no receive timestamp") for e in self.errors):
            self.error("no receive timestamp on a read: latency timed when read")
        return time.time()

    def error(self, text: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(text)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def reach(self, target: int, timeout: float) -> bool:
        """Wait until `target` deliveries were counted; False on timeout or error."""
        if self.received >= target:
            return True
        self._target = target
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._waiter, timeout)
        except TimeoutError:
            return False
        return self.received >= target and not self.errors


class HttpConnection(Timed):
    """Keep-alive request/response, one request in flight, answers framed by httptools
    (`http11.Responses`). `headers` are the last answer's headers named in `keep` (a long-poll
    on nchan reads its validators there).

    A response goes to `request`'s future or, when `listener` is set, straight to the listener
    in the callback that read it: a long-poll loop then costs no task wake-up per poll."""

    def __init__(self, keep: Collection[bytes] = ()) -> None:
        self.transport: asyncio.Transport | None = None
        self.responses = Responses(keep, retry_after=False)
        self.headers: Mapping[bytes, bytes] = NO_HEADERS
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.listener: Listener | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    @property
    def arrived(self) -> float | None:
        """When the last bytes read arrived: an `ArrivalTransport`'s `arrived` (`poll` makes
        its connections so) or, `plain`, when they were read; None on a connection that does
        not know."""
        return self.arrived_on(self.transport)

    def data_received(self, data: bytes) -> None:
        if self.plain:
            self.read_at = time.time()
        try:
            answers = self.responses.feed(data)
        except ConnectionClosed as exc:
            raise BenchError(str(exc)) from None
        for answer in answers:
            self.headers = answer.headers
            self._respond(answer.status, answer.body)

    def _respond(self, status: int, body: bytes) -> None:
        if self.listener is not None:
            self.listener.answered(status, body)
            return
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.listener is not None:
            self.listener.lost()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("server closed the connection"))

    def send(self, raw: bytes) -> None:
        assert self.transport is not None
        self.transport.write(raw)

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        self.waiter = asyncio.get_running_loop().create_future()
        self.send(raw)
        return await self.waiter

    async def json(self, path: str) -> object:
        status, body = await self.request(get_request(path))
        if status != 200:
            raise BenchError(f"GET {path}: {status} {body[:200]!r}")
        return orjson.loads(body)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Listener(Protocol):
    """What takes an `HttpConnection`'s responses as they are read."""

    def answered(self, status: int, body: bytes) -> None: ...

    def lost(self) -> None: ...


async def connect(url: str, source: str = "", keep: Collection[bytes] = ()) -> HttpConnection:
    """A keep-alive connection to `url`'s host, from the local address `source` when given,
    keeping the answers' headers named in `keep`."""
    at = Endpoint.parse(url)
    _, conn = await asyncio.get_running_loop().create_connection(
        lambda: HttpConnection(keep), at.host, at.port, local_addr=(source, 0) if source else None
    )
    return conn


class Publisher:
    """One keep-alive publishing connection; `accepted` are the statuses of a publish."""

    def __init__(self, conn: HttpConnection, accepted: tuple[int, ...] = (201,)) -> None:
        self.conn = conn
        self.accepted = accepted

    @classmethod
    async def open(cls, url: str, accepted: tuple[int, ...] = (201,)) -> Publisher:
        return cls(await connect(url), accepted)

    async def send(self, raw: bytes) -> None:
        status, body = await self.conn.request(raw)
        if status not in self.accepted:
            raise BenchError(f"publish failed: {status} {body[:200]!r}")

    async def one(self, channel: str, size: int = 100) -> None:
        await self.send(publish_request(channel, message_data(size)))

    async def batch(self, channel: str, n: int, size: int = 100) -> None:
        await self.send(batch_request(channel, [message_data(size) for _ in range(n)]))

    def close(self) -> None:
        self.conn.close()


class HeldSubscriber(Timed):
    """A held NDJSON or SSE response: chunked transfer decoded (a body without it, as nchan
    sends, is read as it comes), a gzip body inflated chunk by chunk (the server flushes each
    write), events counted (or parsed)."""

    STATUS = 200
    REQUEST = "subscribe"

    def __init__(self, tally: Tally, terminator: bytes) -> None:
        self.tally = tally
        self.terminator = terminator
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.headers_done = False
        self.chunked = True
        self.last_id = 0
        self.inflate: Any = None
        """The body's gzip decoder (`zlib.decompressobj`) when it came compressed."""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # made by `hold`

    def arrival(self) -> float:
        """When the bytes being read arrived."""
        return self.arrived_on(self.transport) or self.tally.unstamped()

    def data_received(self, data: bytes) -> None:
        if self.plain:
            self.read_at = time.time()
        buf = self.buf
        buf += data
        if not self.headers_done and not self._headers():
            return
        if not self.chunked:
            end = buf.rfind(self.terminator)
            if end >= 0:
                end += len(self.terminator)
                self._events(buf[:end])
                del buf[:end]
            return
        pos, size = 0, len(buf)
        while pos < size:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            length = int(buf[pos:eol], 16)
            start = eol + 2
            if start + length + 2 > size:
                break
            if length:
                self._events(buf[start : start + length])
            pos = start + length + 2
        del buf[:pos]

    def _headers(self) -> bool:
        end = self.buf.find(HEAD_END)
        if end < 0:
            return False
        raw = bytes(self.buf[:end])
        del self.buf[: end + 4]
        self.headers_done = True
        head = _head(raw)
        self.chunked = head.chunked
        if head.headers.get("content-encoding") == "gzip":
            self.inflate = zlib.decompressobj(31)
        if head.status != self.STATUS:
            self.tally.error(f"{self.REQUEST} answered {raw[:100]!r}")
        if not self.ready.done():
            self.ready.set_result(None)
        return True

    def _events(self, payload: bytearray | bytes) -> None:
        if self.inflate is not None:
            payload = self.inflate.decompress(payload)
        n = payload.count(self.terminator)
        if not n:
            return
        now = self.arrival()
        if self.tally.parse:
            self._parse(payload, now)
        self.tally.add(n, now)

    def _parse(self, payload: bytearray | bytes, now: float) -> None:
        for line in bytes(payload).split(b"\n"):
            if line.startswith(b"data: "):
                line = line[6:]
            if line.startswith(b"{"):
                self._line(line, now)

    def _line(self, line: bytes, now: float) -> None:
        """One event's JSON: pushserver's envelope, its id checked for gaps."""
        self._check(self.tally.envelope(line, now))

    def _check(self, id: int) -> None:
        if id < 0:
            return
        if self.last_id and id != self.last_id + 1:
            self.tally.error(f"id {id} after {self.last_id}")
        self.last_id = id

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("closed before the response"))


class WebSocketSubscriber(HeldSubscriber):
    """A WebSocket subscription: server frames are unmasked, one text frame per event."""

    PONG = b"\x8a\x80" + os.urandom(4)
    STATUS = 101
    REQUEST = "WebSocket upgrade"

    def data_received(self, data: bytes) -> None:
        if self.plain:
            self.read_at = time.time()
        buf = self.buf
        buf += data
        if not self.headers_done and not self._headers():
            return
        pos, size, n = 0, len(buf), 0
        parse = self.tally.parse
        now = self.arrival()
        while pos + 2 <= size:
            opcode, length = buf[pos] & 0x0F, buf[pos + 1] & 0x7F
            start = pos + 2
            if length == 126:
                length, start = int.from_bytes(buf[start : start + 2]), start + 2
            elif length == 127:
                length, start = int.from_bytes(buf[start : start + 8]), start + 8
            if start + length > size:
                break
            if opcode == 0x1:
                n += 1
                if parse:
                    self._check(self.tally.envelope(buf[start : start + length], now))
            elif opcode == 0x9 and self.transport is not None:
                self.transport.write(self.PONG)
            pos = start + length
        del buf[:pos]
        if n:
            self.tally.add(n, now)


class LongPoller:
    """A long-poll loop on one keep-alive connection; stops after `expect` messages (never when
    `expect` is 0: a listener that must receive nothing). Each answer is read, and the next
    poll sent, in the callback that received it. This one speaks pushserver's `/lp`;
    subclasses speak other servers' polls through `request` and `messages`."""

    KEEP: tuple[bytes, ...] = ()
    """The answers' headers `request` or `messages` read (`HttpConnection.headers`)."""
    ANSWERS: tuple[int, ...] = (200,)
    """The statuses of a poll's answer (a timeout included); any other is an error."""
    compressed = False
    """Whether it asks for gzip (`Accept-Encoding`); an answer that comes so is inflated."""

    def __init__(self, conn: HttpConnection, channel: str, tally: Tally, expect: int) -> None:
        self.conn = conn
        self.channel = channel
        self.tally = tally
        self.expect = expect
        self.count = 0
        self.cursor = ""
        self.stopped = False
        self.around = (b"", b"")
        self.held = (0.0, 0.0)
        """When the last answer arrived and the next poll went out (`Tally.stamp`)."""

    def request(self) -> bytes:
        """The next poll: the same request but for its cursor, built once around it."""
        before, after = self.around
        return before + self.cursor.encode() + after

    def messages(self, status: int, body: bytes) -> list[Any]:
        """The messages' data in one answer (the cursor taken for the next poll); none when
        the poll timed out."""
        if self.conn.headers.get(b"content-encoding") == b"gzip":
            body = zlib.decompress(body, 31)
        doc = orjson.loads(body)
        self.cursor = doc["cursor"]
        messages = [m for m in doc["messages"] if "type" not in m]
        if len(messages) < len(doc["messages"]):
            gaps = [m for m in doc["messages"] if m.get("type") == "gap"]
            self.tally.error(f"long-poll fell behind the history: {gaps[:1]}")
        return [m["data"] for m in messages]

    def start(self, timeout: float) -> None:
        marker = "{cursor}"
        raw = get_request(
            f"/lp/{self.channel}?timeout={timeout:g}&cursor={marker}",
            {"Accept-Encoding": "gzip"} if self.compressed else None,
        )
        before, _, after = raw.partition(marker.encode())
        self.around = before, after
        self.conn.listener = self
        self.send()

    def send(self) -> None:
        """The next poll, noting when it went out."""
        self.conn.send(self.request())
        self.held = (self.held[0], time.time())

    def stop(self) -> None:
        self.stopped = True
        self.conn.close()

    def answered(self, status: int, body: bytes) -> None:
        if self.stopped:
            return
        if status not in self.ANSWERS:
            self.tally.error(f"long-poll answered {status} {body[:100]!r}")
            self.stopped = True
            return
        now = self.conn.arrived or self.tally.unstamped()
        held = self.held
        self.held = (now, now)
        try:
            datas = self.messages(status, body)
        except (ValueError, KeyError, TypeError) as exc:
            self.tally.error(f"long-poll answer not understood ({exc!r}): {body[:100]!r}")
            self.stop()
            return
        self.count += len(datas)
        if self.expect and self.count >= self.expect:
            self.stopped = True
        else:
            self.send()  # the re-poll goes out first
        if not datas:
            if self.count:
                self.tally.empty += 1
            return
        if self.tally.parse:
            for data in datas:
                self.tally.stamp(data, now, held)
        self.tally.add(len(datas), now)

    def lost(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.tally.error("long-poll: server closed the connection")


class EncodedLongPoller(LongPoller):
    """pushserver's long-poll with its cursor percent-encoded as `encodeURIComponent` writes it
    (browsers, the JS and Java clients): `:` and `,` go as `%3A` and `%2C`."""

    def request(self) -> bytes:
        before, after = self.around
        return before + quote(self.cursor, safe="").encode() + after


Subscriber = HeldSubscriber | LongPoller
Subscription = tuple[Subscriber, Callable[[], None]]


async def poll(
    url: str,
    make: Callable[[HttpConnection], LongPoller],
    timeout: float,
    source: str = "",
    keep: Collection[bytes] = (),
    plain: bool = False,
) -> Subscription:
    """Start the long-poll loop `make` builds on a new connection (keeping the answers' headers
    named in `keep`; `plain`: timed when read); returns it and its stop."""
    at = Endpoint.parse(url)
    make_conn = lambda: HttpConnection(keep)  # noqa: E731
    _, conn = await open_subscriber(make_conn, at.host, at.port, source, plain)
    poller = make(conn)
    poller.start(timeout)
    return poller, poller.stop


async def hold(
    url: str,
    make: Callable[[], HeldSubscriber],
    raw: bytes,
    source: str = "",
    plain: bool = False,
) -> Subscription:
    """Send the subscribe request `raw` on a new connection (`plain`: timed when read) and wait
    for its response head."""
    at = Endpoint.parse(url)
    held, sub = await open_subscriber(make, at.host, at.port, source, plain)
    held.write(raw)
    await sub.ready
    return sub, held.close


async def subscribe(
    url: str,
    transport: str,
    channel: str,
    tally: Tally,
    expect: int,
    poll_timeout: float = 60,
    source: str = "",
    plain: bool = False,
    encoded: bool = False,
    compressed: bool = False,
) -> Subscription:
    """Open one subscription (from the local address `source` when given; `plain`: timed when
    read, on the loop's own transport; `encoded`: a long-poll's cursor percent-encoded;
    `compressed`: asking for gzip on SSE, NDJSON and long-poll); returns it and a function
    that closes it."""
    if transport == "longpoll":
        poller = EncodedLongPoller if encoded else LongPoller

        def make(conn: HttpConnection) -> LongPoller:
            made = poller(conn, channel, tally, expect)
            made.compressed = compressed
            return made

        keep = (b"content-encoding",) if compressed else ()
        return await poll(url, make, poll_timeout, source, keep, plain)
    if transport == "ws":
        key = base64.b64encode(os.urandom(16)).decode()
        raw = get_request(
            f"/ws/{channel}",
            {
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Key": key,
                "Sec-WebSocket-Version": "13",
            },
        )
        factory: Callable[[], HeldSubscriber] = lambda: WebSocketSubscriber(tally, b"")  # noqa: E731
    elif transport in ("stream", "sse"):
        raw = get_request(
            f"/{transport}/{channel}", {"Accept-Encoding": "gzip"} if compressed else None
        )
        term = b"}\n" if transport == "stream" else b"}\n\n"
        factory = lambda: HeldSubscriber(tally, term)  # noqa: E731
    else:
        raise ValueError(f"unknown transport {transport!r}")
    return await hold(url, factory, raw, source, plain)


async def open_many(
    open_one: Callable[[str], Awaitable[Subscription]], channels: Sequence[str]
) -> list[Subscription]:
    """`open_one(channel)` for each entry of `channels`, a bounded number at a time."""
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(channel: str) -> Subscription:
        async with gate:
            return await open_one(channel)

    return list(await asyncio.gather(*(one(c) for c in channels)))


async def subscribe_many(
    url: str, transport: str, channels: Sequence[str], tally: Tally, expect: int
) -> list[Subscription]:
    """One subscriber per entry of `channels`, connecting a bounded number at a time."""
    return await open_many(lambda c: subscribe(url, transport, c, tally, expect), channels)


async def get_json(url: str, path: str) -> Any:
    """One GET on a fresh connection: the server closes idle keep-alive connections, and the
    bench's admin reads may come minutes apart."""
    conn = await connect(url)
    try:
        return await conn.json(path)
    finally:
        conn.close()


async def wait_count(
    count: Callable[[], Awaitable[int]], n: int, what: str, timeout: float
) -> None:
    """Poll `count()` until it reaches `n`; BenchError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (held := await count()) < n:
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: {held} of {n} subscribers after {timeout}s")
        await asyncio.sleep(0.01)


def channel_count(url: str, channel: str) -> Callable[[], Awaitable[int]]:
    """The subscribers of `channel`, from `/channels/{channel}` on fresh connections. With
    `--workers`, each answer counts those of the worker that took it (`worker`), so the latest
    count of every worker heard from is summed."""
    latest: dict[int, int] = {}

    async def count() -> int:
        try:
            info = await get_json(url, f"/channels/{channel}")
        except BenchError:  # 404: nobody subscribed to it on the worker that answered
            return sum(latest.values())
        latest[info["worker"]] = info["subscribers"]
        return sum(latest.values())

    return count


async def wait_subscribed(url: str, channel: str, n: int, timeout: float = 60) -> None:
    """Wait until the server (every worker) holds `n` subscribers of `channel`."""
    await wait_count(channel_count(url, channel), n, f"channel {channel}", timeout)


async def wait_held(url: str, transport: str, n: int, workers: int, timeout: float = 60) -> None:
    """Wait until the server's `workers` processes hold `n` `transport` connections in all.

    `/stats` speaks for the one worker that took the connection, so it is asked on fresh
    connections until every worker has been heard from and the latest counts add up."""
    latest: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while len(latest) < workers or sum(latest.values()) < n:
        if time.monotonic() > deadline:
            raise BenchError(f"{transport} connections per worker: {latest}, wanted {n} in all")
        stats = await get_json(url, "/stats")
        latest[stats["worker"]] = stats["connections"][transport]
        await asyncio.sleep(0.01)
