"""`GET /ws/{channels}`: WebSocket, one JSON text frame per event.

The front end checks the request and answers the handshake (`front.handshake`); then a `HeldWs`,
the transport's protocol and the hub's subscriber in one object, takes the connection. It
answers pings and the close handshake and ignores data frames.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import WSCloseCode

from ...core.subscription import Start
from ...wire.framing import WEBSOCKET
from ...wire.websocket import (
    CLOSE,
    PING,
    PONG,
    FrameError,
    client_frames,
    close_frame,
    frame,
)
from ..front.handshake import accept
from ..front.head import RequestHead
from ..state import ServerState
from .common import HeldSubscriber, begin, open_channels, subscribe_request, take_over

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol

CLOSE_CODES = {"shutdown": WSCloseCode.SERVICE_RESTART, "expired": WSCloseCode.POLICY_VIOLATION}
CLOSE_WAIT = 5.0
"""Seconds a server-side close waits for the client's close frame before dropping the socket."""


class HeldWs(HeldSubscriber):
    """A held WebSocket subscriber; `unread` holds a frame still arriving."""

    __slots__ = ("closing", "unread")

    def __init__(self, start: Start, transport: asyncio.Transport, state: ServerState) -> None:
        super().__init__(start, transport, WEBSOCKET, state)
        self.unread = b""
        self.closing = False

    def data_received(self, data: bytes) -> None:
        try:
            frames, self.unread = client_frames(self.unread + data)
        except FrameError as exc:
            self.unread = b""
            self._close(exc.code, exc.reason.encode())
            return
        transport = self.transport
        for opcode, payload in frames:
            if opcode == PING:
                transport.write(frame(PONG, payload))
            elif opcode == CLOSE:
                if not self.closing:
                    self.closing = True
                    transport.write(frame(CLOSE, payload[:2]))
                transport.close()
                return

    def end(self) -> None:
        """Start the close handshake with a code that says why."""
        reason = str(self.reason)
        self._close(CLOSE_CODES.get(reason, WSCloseCode.GOING_AWAY), reason.encode())

    def _close(self, code: int, reason: bytes) -> None:
        transport = self.transport
        if self.closing or transport.is_closing():
            return
        self.closing = True
        transport.write(close_frame(code, reason))
        asyncio.get_running_loop().call_later(CLOSE_WAIT, transport.abort)


async def handle(conn: FrontProtocol, head: RequestHead) -> None:
    sub_req = subscribe_request(conn.front.state, head, conn.remote(head), "ws")
    channels = await open_channels(sub_req)  # a bad cursor is refused before the handshake
    key_accept = accept(head)
    upgraded = conn.upgrade(head, key_accept)
    if upgraded is None:
        return
    transport, rest = upgraded
    sub, events = begin(sub_req, channels, HeldWs, transport, sub_req.state)
    take_over(transport, sub_req, sub, events)
    if rest:
        sub.data_received(rest)
