"""WebSocket: one JSON text frame per event; server pings count as signs of life.

It offers permessage-deflate (RFC 7692); aiohttp inflates what the server compressed, keeping
the window between messages as the server may use it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import aiohttp
from yarl import URL

from ..errors import NetworkError, error_from_response
from .base import Connected, Event, Transport, decode_event

# A dead peer never answers our close frame: do not wait for it long.
_CLOSE_TIMEOUT = aiohttp.ClientWSTimeout(ws_close=1.0)
_DATA = (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY)


class WebSocketTransport(Transport):
    name = "ws"
    path = "ws"

    async def events(
        self, session: aiohttp.ClientSession, url: URL, params: dict[str, str], idle: float
    ) -> AsyncGenerator[Event, None]:
        try:
            async with asyncio.timeout(idle):
                ws = await session.ws_connect(
                    url, params=params, autoping=True, timeout=_CLOSE_TIMEOUT, compress=15
                )
        except aiohttp.WSServerHandshakeError as exc:
            # aiohttp keeps the status and headers of a refused handshake, not its body.
            raise error_from_response(exc.status, b"", exc.headers or {}) from exc
        try:
            yield Connected()
            while True:
                msg = await ws.receive(timeout=idle)
                if msg.type in _DATA:
                    if (event := decode_event(msg.data)) is not None:
                        yield event
                elif msg.type is aiohttp.WSMsgType.ERROR:
                    raise NetworkError(f"websocket error: {msg.data}")
                else:
                    return  # closed by the server or the network
        finally:
            await ws.close()
