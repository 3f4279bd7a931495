"""`GET /ws/{channels}`: WebSocket, one JSON text frame per event.

aiohttp checks the request and answers the handshake; then the connection is handed off (see
`handoff`) to a `HeldWs`, the transport's protocol and the hub's subscriber in one object. What
the client sends is read by `wire.websocket.ClientReader` (pings answered, data ignored, broken
frames refused); once either side has sent a close, the subscriber leaves the hub at once, so
nothing but the close goes out, and the socket is dropped within `CLOSE_TIMEOUT`.
"""

from __future__ import annotations

import asyncio

from aiohttp import WSCloseCode, web

from ...core.subscription import Start
from ...wire.framing import WEBSOCKET
from ...wire.websocket import MAX_FRAME, ClientReader
from ..errors import error_response
from ..state import ServerState
from .common import HeldSubscriber, begin, open_channels, subscribe_request, take_over

CLOSE_CODES = {"shutdown": WSCloseCode.SERVICE_RESTART, "expired": WSCloseCode.POLICY_VIOLATION}
CLOSE_TIMEOUT = 2.0
"""Seconds a closing connection has to finish the close handshake before the socket is dropped."""
READ_SHARE = 16 << 10
"""Bytes of one client's input read per loop turn (about 1 ms of work for a flood of pings)."""
VERSION = "13"
"""The only `Sec-WebSocket-Version` served (RFC 6455)."""


class HeldWs(HeldSubscriber):
    """A handed-off WebSocket subscriber; `reader` exists once the client has sent something
    or the server has closed."""

    __slots__ = ("closing", "reader")

    def __init__(self, start: Start, transport: asyncio.Transport, state: ServerState) -> None:
        super().__init__(start, transport, WEBSOCKET, state)
        self.reader: ClientReader | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Reading may have been paused by aiohttp's flow control before the hand-off (a
        client that sent frames before the 101); from here on this protocol decides."""
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        if reader is None:
            reader = self.reader = ClientReader()
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
        reader = self.reader
        if reader is None:
            reader = self.reader = ClientReader()
        self._send(reader, reader.close(CLOSE_CODES.get(reason, WSCloseCode.GOING_AWAY), reason))

    def _send(self, reader: ClientReader, out: list[bytes]) -> None:
        """Write the reader's answers; an empty one closes the socket. Answers count against
        `--max-buffer-bytes` like messages do, so a client that sends faster than it reads is
        cut off."""
        transport = self.transport
        for chunk in out:
            if chunk:
                transport.write(chunk)
            else:
                transport.close()
        hub = self.state.hub
        if reader.open:
            if transport.get_write_buffer_size() > hub.max_buffer_bytes:
                hub.cut_off([self])
        elif not self.closing:
            self.closing = True
            hub.detach(self)
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, transport.abort)


def version_refusal(request: web.Request) -> web.Response | None:
    """RFC 6455 §4.4: a version the server does not speak is refused naming the one it does
    (aiohttp's own refusal does not); requests that are not upgrades are left to aiohttp."""
    version = request.headers.get("Sec-WebSocket-Version", "")
    if request.headers.get("Upgrade", "").lower() != "websocket" or version == VERSION:
        return None
    return error_response(
        400,
        "bad_websocket_version",
        f"Sec-WebSocket-Version {version[:20]!r} is not supported; use {VERSION}",
        {"Sec-WebSocket-Version": VERSION},
    )


async def handle(request: web.Request) -> web.StreamResponse:
    sub_req = subscribe_request(request, "ws")
    try:
        refusal = version_refusal(request)
        if refusal is not None:
            return refusal
        channels = await open_channels(sub_req)
        ws = web.WebSocketResponse(compress=False, autoping=True, max_msg_size=MAX_FRAME)
        await ws.prepare(request)
        sub, events = begin(sub_req, channels, HeldWs, request.transport, sub_req.state)
        handed = take_over(request, sub_req, sub, events, 101)
    finally:
        sub_req.release()
    return ws if handed is None else handed
