"""The servers experiment 9 can measure with one client: pushserver, nginx with nchan, or the
bench's bare server (`bare.py`, the floor), which speaks nchan's protocol.

A target names where a channel's messages are published and where it is subscribed to, as URL
prefixes the channel name is appended to. pushserver publishes at `/pub/{channel}` and serves
`/lp` and `/sse`; nchan publishes with a POST to its publisher location and serves a long-poll
(the next message after the `Last-Modified`/`Etag` of the last one) or an EventSource stream
from its subscriber location (docs/performance.md, "Against nginx+nchan").
"""

from __future__ import annotations

import dataclasses
import functools
from urllib.parse import urlsplit

import orjson

from pushserver_measure.http11 import Endpoint, request_bytes

from .client import (
    HOST,
    JSON,
    BenchError,
    HeldSubscriber,
    HttpConnection,
    LongPoller,
    Publisher,
    Subscription,
    Tally,
    connect,
    get_request,
    hold,
    poll,
    publish_request,
    subscribe,
    wait_count,
    wait_subscribed,
)

TRANSPORTS = ("longpoll", "sse")
KINDS = ("pushserver", "nchan", "bare")


class NchanLongPoller(LongPoller):
    """nchan's long-poll: one message per answer, the next asked for with the last one's
    validators; a poll that timed out (`nchan_subscriber_timeout`) is answered 408 and asked
    again with the same."""

    KEEP = (b"last-modified", b"etag")
    ANSWERS = (200, 408)

    def __init__(self, conn: HttpConnection, path: str, tally: Tally, expect: int) -> None:
        super().__init__(conn, "", tally, expect)
        self.head = get_request(path)[:-2]
        """The poll's head but its last, empty line, built once."""
        self.validators = b""
        """The last answer's validators as the next poll's header lines, as sent."""

    def request(self) -> bytes:
        return self.head + self.validators + b"\r\n"

    def messages(self, status: int, body: bytes) -> list[object]:
        if status == 408:
            return []
        headers = self.conn.headers
        self.validators = b"If-Modified-Since: %b\r\nIf-None-Match: %b\r\n" % (
            headers.get(b"last-modified", b""),
            headers.get(b"etag", b""),
        )
        return [orjson.loads(body)]


class NchanEventSource(HeldSubscriber):
    """nchan's EventSource stream: each `data:` line is the published body itself."""

    def _line(self, line: bytes, now: float) -> None:
        self.tally.stamp(orjson.loads(line), now)


@dataclasses.dataclass(frozen=True)
class Target:
    """`pub` and `sub`: the URL a channel name is appended to (pushserver: the server's root);
    `poll_timeout`: how long pushserver holds a long-poll (`?timeout`; nchan's is configured);
    `encode_cursor`: pushserver's long-poll cursor sent percent-encoded, as browsers send it."""

    kind: str
    pub: str
    sub: str
    poll_timeout: float = 60
    encode_cursor: bool = False
    compressed: bool = False
    """Its subscribers ask for compression (gzip) and inflate what comes compressed."""

    @classmethod
    def of(cls, kind: str, url: str, pub: str = "", sub: str = "") -> Target:
        """The target at `url`; nchan's (and the bare server's) locations default to
        `{url}/pub/` and `{url}/sub/`."""
        if kind not in KINDS:
            raise ValueError(f"unknown target {kind!r}")
        root = url.rstrip("/")
        if kind == "pushserver":
            return cls(kind, pub or root, sub or root)
        return cls(kind, pub or f"{root}/pub/", sub or f"{root}/sub/")

    @property
    def endpoints(self) -> list[Endpoint]:
        return [Endpoint.parse(self.pub), Endpoint.parse(self.sub)]

    def _path(self, url: str, channel: str) -> str:
        return urlsplit(url).path + channel

    def publish(self, channel: str, data: bytes) -> bytes:
        """The request that publishes `data` to `channel`."""
        if self.kind == "pushserver":
            return publish_request(channel, data)
        return request_bytes("POST", HOST, self._path(self.pub, channel), data, JSON)

    async def publisher(self) -> Publisher:
        """A keep-alive publishing connection (nchan answers 202 when nobody listens)."""
        return await Publisher.open(self.pub, (201,) if self.kind == "pushserver" else (201, 202))

    async def subscribe(
        self,
        transport: str,
        channel: str,
        tally: Tally,
        expect: int,
        source: str = "",
        plain: bool = False,
    ) -> Subscription:
        """One `transport` subscriber of `channel`, from the local address `source` if given
        (`plain`: the plain client's, timed when read)."""
        if self.kind == "pushserver":
            return await subscribe(
                self.sub,
                transport,
                channel,
                tally,
                expect,
                self.poll_timeout,
                source,
                plain,
                self.encode_cursor,
                self.compressed,
            )
        path = self._path(self.sub, channel)
        if transport == "longpoll":
            make = lambda conn: NchanLongPoller(conn, path, tally, expect)  # noqa: E731
            return await poll(self.sub, make, 60, source, NchanLongPoller.KEEP, plain)
        if transport != "sse":
            raise ValueError(f"nchan is measured on {TRANSPORTS}, not {transport!r}")
        raw = get_request(path, {"Accept": "text/event-stream"})
        make_held = lambda: NchanEventSource(tally, b"}\n\n")  # noqa: E731
        return await hold(self.sub, make_held, raw, source, plain)

    async def _nchan_subscribers(self, channel: str) -> int:
        """How many subscribers nchan holds on `channel` (0 before it exists)."""
        conn = await connect(self.pub)
        try:
            path = self._path(self.pub, channel)
            status, body = await conn.request(get_request(path, {"Accept": "application/json"}))
        finally:
            conn.close()
        if status == 404:
            return 0
        if status != 200:
            raise BenchError(f"GET {path}: {status} {body[:200]!r}")
        return int(orjson.loads(body)["subscribers"])

    async def wait_subscribed(self, channel: str, n: int, timeout: float = 120) -> None:
        """Poll until the server holds `n` subscribers on `channel` (pushserver: in all its
        workers)."""
        if self.kind == "pushserver":
            await wait_subscribed(self.sub, channel, n, timeout)
            return
        count = functools.partial(self._nchan_subscribers, channel)
        await wait_count(count, n, f"channel {channel}", timeout)
