"""Requests the front end does not serve itself go to aiohttp, one request at a time.

For the first such request on a connection (`serve`) an aiohttp protocol is made
(`runner.server`, aiohttp's public protocol factory) over a `Conduit`, a stand-in transport that
writes to the connection's own. Each request is given to it as bytes: its head as it was sent,
and its body as it arrives (its end found by `http.body.Body`: a length, or the last chunk of a
chunked body). The app's outermost middleware (`app.json_errors`) sends aiohttp's answer and
tells the conduit; once aiohttp's handling has run to its end, the connection reads its next
request. aiohttp's protocol stays for the connection's next requests of its own (a monitor
scraping `/metrics` on a kept-alive connection makes one); before the connection serves one
itself, the protocol is told the connection is gone (`connection_lost`), which tears it down.
An answer that closes the connection closes it. Nothing private of aiohttp is used.

Measured (docs/architecture.md, "Where aiohttp serves"): a protocol made and torn down for each
request cost 40 us more per kept-alive `/healthz` than one kept for the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..http.body import Body
from ..http.request import RequestHead

if TYPE_CHECKING:
    from .connection import Connection


def serve(conn: Connection, head: RequestHead) -> None:
    """Pass the request whose head is being routed to aiohttp."""
    forwarding = conn.http
    if forwarding is None:
        forwarding = conn.http = Forwarding(conn)
    forwarding.start(head)


class Forwarding:
    """aiohttp's protocol for a front-end connection, and the request it answers."""

    __slots__ = ("body", "conduit", "conn", "protocol", "replied")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.conduit = Conduit(conn, conn.io.transport)
        self.protocol = conn.front.http()
        self.protocol.connection_made(self.conduit)
        self.replied = False
        """aiohttp's answer is out, and the connection goes on once the body has passed."""
        self.body: Body | None = None
        """The request body still to pass on."""

    def start(self, head: RequestHead) -> None:
        conn, protocol = self.conn, self.protocol
        self.replied = False
        protocol.data_received(conn.raw)
        if head.body_length:
            body = Body(head.body_length, 0, passed=protocol.data_received)
            conn.buffer = body.feed(conn.buffer)
            if not body.over:
                self.body = body
                conn.read_into(self.feed)

    def feed(self, data: bytes) -> bytes:
        """The body's part of `data` to aiohttp; what follows it back to the connection."""
        body = self.body
        assert body is not None
        rest = body.feed(data)
        if body.over:
            self.body = None
            self.conn.read_into(None)
            if self.replied:
                self._later()
        return rest

    def sent(self, keep_alive: bool) -> None:
        """From the conduit: aiohttp's answer is out (a closing one closes the conduit)."""
        if keep_alive and self.conn.http is self:
            self.replied = True
            if self.body is None:
                self._later()

    def _later(self) -> None:
        """Back to the connection's next request once aiohttp's request handling has run to
        its end."""
        self.conn.front.loop.call_soon(self._finish)

    def _finish(self) -> None:
        if self.conn.http is self:
            self.conn.finish(True)

    def close(self) -> None:
        """The connection serves a request itself: aiohttp's protocol is told the connection is
        gone, which tears its handler down; nothing it does afterwards reaches the connection."""
        self.conduit.detached = True
        self.protocol.connection_lost(None)

    def lost(self, exc: Exception | None) -> None:
        self.protocol.connection_lost(exc)

    def writable(self, writable: bool) -> None:
        if writable:
            self.protocol.resume_writing()
        else:
            self.protocol.pause_writing()


class Conduit(asyncio.Transport):
    """What aiohttp's protocol takes for its transport: writes go straight to the connection's
    transport; closing the conduit closes the connection. (It refers to the connection, not to
    its `Forwarding`, which refers to it: no cycle outlives the request.)"""

    __slots__ = ("conn", "detached", "transport")

    def __init__(self, conn: Connection, transport: asyncio.Transport) -> None:
        super().__init__()
        self.conn = conn
        self.transport = transport
        self.detached = False

    def sent(self, keep_alive: bool) -> None:
        """aiohttp's answer to the request it was given is out (sent by the app's outermost
        middleware); `keep_alive` says whether the connection goes on."""
        http = self.conn.http
        if not self.detached and http is not None:
            http.sent(keep_alive)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.detached:
            self.transport.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        if not self.detached:
            self.transport.writelines(list_of_data)

    def is_closing(self) -> bool:
        return self.detached or self.transport.is_closing()

    def close(self) -> None:
        if not self.detached:
            self.detached = True
            self.conn.close()

    def abort(self) -> None:
        if not self.detached:
            self.detached = True
            self.conn.close(abort=True)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if not self.detached:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.detached:
            self.transport.resume_reading()

    def is_reading(self) -> bool:
        return not self.detached and self.transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def write_eof(self) -> None:
        if not self.detached:
            self.transport.write_eof()
