"""A held HTTP response (NDJSON stream or SSE) that the fan-out writes to directly.

aiohttp sends the status line, headers and the first chunk; after that the hub writes
pre-framed chunks straight to the transport, and aiohttp ends the chunked body on return.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.http import HttpVersion11

from ..frames import Framing
from ..subscriber import StreamSubscriber
from .common import begin, holding, int_param, open_channels, subscribe_request

HEADERS = {"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"}


async def serve_held(
    request: web.Request,
    kind: str,
    content_type: str,
    framings: tuple[Framing, Framing],
    cursor: str | None = None,
) -> web.StreamResponse:
    """Hold a subscriber until it disconnects, is cut off or the server drains."""
    sub_req = subscribe_request(request, kind, cursor)
    pad = int_param(request, "pad", 0, 0, sub_req.state.settings.max_pad)
    chunked, plain = framings
    framing = chunked if request.version >= HttpVersion11 else plain
    channels = await open_channels(sub_req)
    response = web.StreamResponse(headers=HEADERS)
    response.content_type = content_type
    response.force_close()  # announced up front: clients must not reuse a held connection
    request.protocol.keep_alive(False)  # as WebSocketResponse does: frees the idle-close timer
    await response.prepare(request)
    # The first write sends the headers; from here on everything goes straight to the transport.
    await response.write(framing.comment(b" " * pad))
    sub, events = begin(sub_req, channels, StreamSubscriber, request.transport, framing)
    if events:
        request.transport.write(framing.chunk(sub.encode(framing, events)))
    async with holding(request, sub_req, sub):
        await sub.closed
    return response
