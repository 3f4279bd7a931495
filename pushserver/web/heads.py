"""Connections whose request head is not finished yet.

aiohttp keeps a head's bytes until the blank line that ends it, so without a bound a client can
open many connections, send long heads and never finish them: each holds memory and a socket
and, being no subscriber yet, escaped the connection limits. Every accepted connection gets a
`HeadWatch` in front of aiohttp's protocol, which counts it as a `head` connection (in
`--max-connections` and `--max-connections-per-ip`, and in /stats) until its head reaches the
application, and closes it when the head passes `--max-head-bytes`. A connection accepted while
unfinished heads already fill a limit is refused at once. `--request-timeout` (aiohttp's
keep-alive timeout) ends a head that takes too long; aiohttp's `max_line_size`, `max_field_size`
and `max_headers` bound each part.
"""

from __future__ import annotations

import asyncio
import http
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

import orjson
from aiohttp import web

from .state import STATE, ServerState

HEAD_END = b"\r\n\r\n"
HEAD = "head"
"""The kind under which unfinished heads are counted in the hub's connections."""
LINGER = 2.0
"""Seconds a refused connection stays half-closed so that its client reads the answer: closing
with its request unread would reset the connection and could lose the answer."""


def refusal(status: int, code: str, message: str) -> bytes:
    """A complete JSON error response, for a connection aiohttp never got a request from."""
    body = orjson.dumps({"error": code, "message": message})
    reason = http.HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class HeadGuard:
    """The protocol factory in front of aiohttp's, and the heads it is watching."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.watching: dict[asyncio.BaseTransport, HeadWatch] = {}
        self.per_ip: Counter[str] = Counter()
        """Unfinished heads per client address."""

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: HeadWatch(self, inner())

    def full(self, remote: str) -> tuple[int, str, str] | None:
        """Why a new connection is refused: unfinished heads already fill a limit."""
        settings, hub = self.state.settings, self.state.hub
        heads = hub.connections[HEAD]
        if heads >= settings.max_connections:
            hub.stats.limits_hit["max_connections"] += 1
            return 503, "over_capacity", "too many connections with unfinished requests"
        per_ip = settings.max_connections_per_ip
        if per_ip and self.per_ip[remote] >= per_ip:
            hub.stats.limits_hit["max_connections_per_ip"] += 1
            return 429, "too_many_connections", f"at most {per_ip} connections per client address"
        return None

    def reached(self, request: web.Request) -> HeadWatch | None:
        """The request's head reached the application: its connection no longer counts."""
        watch = self.watching.pop(request.transport, None)  # type: ignore[arg-type]
        if watch is not None:
            watch.finish()
        return watch


HEADS = web.AppKey("pushserver_heads", HeadGuard)


class HeadWatch(asyncio.Protocol):
    """Passes everything to aiohttp's protocol; counts and bounds the head being received.

    After a response the next bytes start the next head (keep-alive). A connection handed off
    to a subscriber gets another protocol, and this one is simply dropped.
    """

    __slots__ = (
        "between",
        "counted",
        "guard",
        "inner",
        "received",
        "refused",
        "remote",
        "tail",
        "transport",
    )

    def __init__(self, guard: HeadGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.remote = "-"
        self.counted = False
        self.refused = False
        self.between = False
        """Waiting for the next request's first byte, after a response."""
        self.received = 0
        self.tail: bytes | None = b""
        """The last bytes received, to find the head's end across reads; None once found."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        peer = transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, list | tuple) else "-"
        self.inner.connection_made(transport)
        refused = self.guard.full(self.remote)
        if refused is not None:
            self._refuse(*refused)
        else:
            self._start()

    def _start(self) -> None:
        assert self.transport is not None
        self.counted, self.between = True, False
        self.received, self.tail = 0, b""
        self.guard.watching[self.transport] = self
        self.guard.per_ip[self.remote] += 1
        self.guard.state.hub.enter(HEAD, self.remote)

    def finish(self) -> None:
        if self.counted:
            self.counted = False
            per_ip = self.guard.per_ip
            per_ip[self.remote] -= 1
            if not per_ip[self.remote]:
                del per_ip[self.remote]
            self.guard.state.hub.leave(HEAD, self.remote)

    def expect_next(self) -> None:
        self.between = True

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer, half-close, and drop what the client still sends until it closes."""
        transport = self.transport
        assert transport is not None
        self.finish()
        self.refused = True
        transport.write(refusal(status, code, message))
        transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.between:
            self._start()
        if self.counted and self.tail is not None:
            if HEAD_END in self.tail + data[:3] or HEAD_END in data:
                self.tail = None  # the head is whole; what follows is a body or the next request
            else:
                self.received += len(data)
                self.tail = data[-3:]
                limit = self.guard.state.settings.max_head_bytes
                if self.received > limit:
                    self.guard.state.hub.stats.limits_hit["max_head_bytes"] += 1
                    message = f"request head over {limit} bytes"
                    self._refuse(431, "too_large", message)
                    return
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.refused else self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.finish()
        if self.transport is not None:
            self.guard.watching.pop(self.transport, None)
        self.inner.connection_lost(exc)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def head_reached(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Stop counting the connection as an unfinished head; after the response, its next
    request's head is watched again."""
    guard = request.app.get(HEADS)
    watch = None if guard is None else guard.reached(request)
    try:
        return await handler(request)
    finally:
        if watch is not None:
            watch.expect_next()


def install(app: web.Application) -> HeadGuard:
    """Watch heads for this app; the guard's `factory` wraps the server's protocol factory."""
    guard = app[HEADS] = HeadGuard(app[STATE])
    return guard
