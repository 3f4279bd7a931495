"""`GET /ws/{channels}`: WebSocket, one JSON text frame per event; frames from the client are
read (for close and pong) and otherwise ignored."""

from __future__ import annotations

import asyncio

from aiohttp import WSCloseCode, web

from ..frames import WEBSOCKET
from ..subscriber import StreamSubscriber
from .common import begin, holding, open_channels, subscribe_request

_closing: set[asyncio.Task[bool]] = set()
"""Close handshakes under way, referenced until done so they are not collected mid-flight."""

CLOSE_CODES = {"shutdown": WSCloseCode.SERVICE_RESTART, "expired": WSCloseCode.POLICY_VIOLATION}


async def handle(request: web.Request) -> web.WebSocketResponse:
    sub_req = subscribe_request(request, "ws")
    channels = await open_channels(sub_req)
    ws = web.WebSocketResponse(compress=False, autoping=True, max_msg_size=64 << 10)
    await ws.prepare(request)
    sub, events = begin(sub_req, channels, StreamSubscriber, request.transport, WEBSOCKET)
    backlog = sub.encode(WEBSOCKET, events)
    if backlog:
        request.transport.write(backlog)
    sub.closed.add_done_callback(lambda f: _close_soon(ws, f.result()))
    async with holding(request, sub_req, sub):
        async for _ in ws:
            pass
    return ws


def _close_soon(ws: web.WebSocketResponse, reason: str) -> None:
    if reason != "client" and not ws.closed:
        code = CLOSE_CODES.get(reason, WSCloseCode.GOING_AWAY)
        task = asyncio.ensure_future(ws.close(code=code, message=reason.encode()))
        _closing.add(task)
        task.add_done_callback(_closing.discard)
