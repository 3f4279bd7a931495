"""`GET /ws/{channels}`: WebSocket, one JSON text frame per event; frames from the client are
read (for close and pong) and otherwise ignored."""

from __future__ import annotations

import asyncio

from aiohttp import WSCloseCode, web

from ..frames import WEBSOCKET
from ..subscriber import Start, StreamSubscriber
from .common import begin, hold, let_go, open_channels, subscribe_request

_closing: set[asyncio.Task[bool]] = set()
"""Close handshakes under way, referenced until done so they are not collected mid-flight."""

CLOSE_CODES = {"shutdown": WSCloseCode.SERVICE_RESTART, "expired": WSCloseCode.POLICY_VIOLATION}


class WsStream(StreamSubscriber):
    """A WebSocket subscriber; aiohttp keeps the connection, to read the client's frames."""

    __slots__ = ("ws",)

    def __init__(
        self, start: Start, transport: asyncio.Transport, ws: web.WebSocketResponse
    ) -> None:
        super().__init__(start, transport, WEBSOCKET)
        self.ws = ws

    def end(self) -> None:
        """Start the close handshake with a code that says why; the handler then lets go."""
        reason = str(self.reason)
        if not self.ws.closed:
            code = CLOSE_CODES.get(reason, WSCloseCode.GOING_AWAY)
            task = asyncio.ensure_future(self.ws.close(code=code, message=reason.encode()))
            _closing.add(task)
            task.add_done_callback(_closing.discard)


async def handle(request: web.Request) -> web.WebSocketResponse:
    sub_req = subscribe_request(request, "ws")
    channels = await open_channels(sub_req)
    ws = web.WebSocketResponse(compress=False, autoping=True, max_msg_size=64 << 10)
    await ws.prepare(request)
    sub, events = begin(sub_req, channels, WsStream, request.transport, ws)
    backlog = sub.encode(WEBSOCKET, events)
    if backlog:
        request.transport.write(backlog)
    hold(sub_req.state, sub, sub_req.expires)
    try:
        async for _ in ws:
            pass
    finally:
        let_go(sub_req.state, sub)
    return ws
