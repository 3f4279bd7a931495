"""`GET /ws/{channels}`: WebSocket, one JSON text frame per event.

The front end checks the request and answers the handshake (`front.handshake`); then a `HeldWs`,
the transport's protocol and the hub's subscriber in one object, takes the connection. What the
client sends is read by `wire.websocket.ClientReader` (pings answered, data ignored, broken
frames refused); once either side has sent a close, the subscriber leaves the fan-out at once, so
nothing but the close goes out, and the socket is dropped within `CLOSE_TIMEOUT`; a shutdown
waits for that (`Hub.linger`), so a client's close never meets a reset.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import WSCloseCode

from ...core.subscription import Start
from ...wire.compression import (
    Accepted,
    LoneReceiver,
    Receiver,
    accept_permessage_deflate,
    inbound_deflate,
)
from ...wire.framing import WEBSOCKET
from ...wire.websocket import ClientReader
from ..http.request import RequestHead
from ..state import ServerState
from . import probe
from .common import (
    HeldSubscriber,
    begin,
    open_channels,
    parse_subscribe,
    subscribe_request,
    take_over,
)
from .exchange import Headers, Transport
from .handshake import HandshakeError, accept

if TYPE_CHECKING:
    from .exchange import Exchange

NAME = "ws"
CLOSE_CODES = {"shutdown": WSCloseCode.SERVICE_RESTART, "expired": WSCloseCode.POLICY_VIOLATION}
CLOSE_TIMEOUT = 2.0
"""Seconds a closing connection has to finish the close handshake before the socket is dropped."""
READ_SHARE = 16 << 10
"""Bytes of one client's input read per loop turn (about 1 ms of work for a flood of pings)."""


class HeldWs(HeldSubscriber):
    """A held WebSocket subscriber; `reader` exists once the client has sent something or the
    server has closed. With permessage-deflate (`deflate`), its messages go out compressed
    (`coder`) and the client's compressed ones are read."""

    __slots__ = ("closing", "reader")

    def __init__(
        self,
        start: Start,
        transport: asyncio.Transport,
        state: ServerState,
        deflate: Accepted | None = None,
    ) -> None:
        if deflate is None:
            super().__init__(start, transport, WEBSOCKET, state)
        else:
            framing = WEBSOCKET.compressed()
            assert framing.coding is not None
            coder = (Receiver if deflate.chained else LoneReceiver)(framing.coding)
            super().__init__(start, transport, framing, state, coder)
        self.reader: ClientReader | None = None
        self.closing = False

    def _reader(self) -> ClientReader:
        reader = self.reader
        if reader is None:
            reader = self.reader = ClientReader(None if self.coder is None else [inbound_deflate()])
        return reader

    def data_received(self, data: bytes) -> None:
        reader = self._reader()
        if len(data) > READ_SHARE:
            self.transport.pause_reading()
        self._read(reader, data, 0)

    def _read(self, reader: ClientReader, data: bytes, start: int) -> None:
        """Read `READ_SHARE` bytes of `data` from `start`, and the rest on later loop turns
        (reading paused meanwhile), so a flood of frames costs other clients at most that much
        work between two of their turns."""
        transport = self.transport
        if reader.done or transport.is_closing():
            return
        end = start + READ_SHARE
        self._send(reader, reader.feed(data[start:end]))
        if end < len(data):
            asyncio.get_running_loop().call_soon(self._read, reader, data, end)
        elif start and not transport.is_closing():
            transport.resume_reading()

    def end(self) -> None:
        """Start the close handshake with a code that says why."""
        if self.transport.is_closing():
            return
        reason = str(self.reason)
        reader = self._reader()
        self._send(reader, reader.close(CLOSE_CODES.get(reason, WSCloseCode.GOING_AWAY), reason))

    def _send(self, reader: ClientReader, out: list[bytes]) -> None:
        """Write the reader's answers; an empty one closes the socket. Answers count against
        `--max-buffer-bytes` like messages do, so a client that sends faster than it reads is
        cut off."""
        transport = self.transport
        for chunk in out:
            if chunk:
                transport.write(chunk)
            elif transport.can_write_eof():
                # Half-close, and let the client close: closing with its late bytes unread
                # would reset the connection, and a reset can destroy the close frame before
                # the client reads it. `CLOSE_TIMEOUT` still bounds how long this takes.
                transport.write_eof()
            else:
                transport.close()
        hub = self.state.hub
        if reader.open:
            if transport.get_write_buffer_size() > hub.fanout.max_buffer_bytes:
                hub.fanout.cut_off([self])
        elif not self.closing:
            self.closing = True
            hub.detach(self)
            hub.shutdown.linger(self)  # a shutdown lets the client answer its close
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.state.hub.shutdown.closed(self)


def negotiate(state: ServerState, head: RequestHead) -> Accepted | None:
    """The permessage-deflate this connection gets (RFC 7692): None when the server does not
    compress or the client offers none the server takes."""
    offers = head.headers.get("sec-websocket-extensions")
    if not offers or not state.settings.compress:
        return None
    return accept_permessage_deflate(offers)


async def handle(conn: Exchange, head: RequestHead) -> None:
    sub_req = subscribe_request(conn.state, head, conn.remote(head), NAME)
    try:
        start = await open_channels(sub_req)  # a bad cursor is refused before the handshake
        headers = [("Upgrade", "websocket"), ("Connection", "upgrade")]
        headers.append(("Sec-WebSocket-Accept", accept(head)))
        deflate = negotiate(sub_req.state, head)
        if deflate is not None:
            headers.append(("Sec-WebSocket-Extensions", deflate.header))
        upgraded = conn.hand_over(head, 101, headers)
        if upgraded is None:
            return
        transport, rest = upgraded
        sub, events = begin(start, HeldWs, transport, sub_req.state, deflate)
        take_over(transport, sub_req, sub, events)
    finally:
        sub_req.release()
    if rest:
        sub.data_received(rest)


def check(conn: Exchange, head: RequestHead) -> Headers:
    """A HEAD is no opening handshake: refused as a GET without the upgrade headers is."""
    parsed = parse_subscribe(conn.state, head, NAME)
    probe.check_subscription(conn, head, parsed, head.query.get("cursor", ""))
    accept(head)
    raise HandshakeError("a WebSocket handshake is a GET request (RFC 6455 section 4.1)")


TRANSPORT = Transport("ws", NAME, handle, check, (WEBSOCKET,))
