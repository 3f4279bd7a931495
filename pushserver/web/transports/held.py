"""A held HTTP response (NDJSON stream or SSE) that the fan-out writes to directly.

aiohttp checks the request and sends the status line, headers and padding; then the connection
is handed off (see `handoff`) to a `HeldStream` until the client leaves or the server ends it.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.http import HttpVersion11

from ...wire.framing import Framing
from .common import HeldSubscriber, begin, int_param, open_channels, subscribe_request, take_over

HEADERS = {"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"}
LAST_CHUNK = b"0\r\n\r\n"


class HeldStream(HeldSubscriber):
    """A handed-off NDJSON or SSE stream; what it receives is ignored."""

    __slots__ = ()

    def data_received(self, data: bytes) -> None:
        """A held stream's client has nothing to say; a pipelined request is not answered."""

    def end(self) -> None:
        """Finish the body as aiohttp would (the last chunk) and close once it is sent."""
        transport = self.transport
        if not transport.is_closing():
            if self.framing.chunked:
                transport.write(LAST_CHUNK)
            transport.close()


async def serve_held(
    request: web.Request,
    kind: str,
    content_type: str,
    framings: tuple[Framing, Framing],
    cursor: str | None = None,
) -> web.StreamResponse:
    """Check the request, send the head and hand the connection to a `HeldStream`."""
    sub_req = subscribe_request(request, kind, cursor)
    try:
        pad = int_param(request, "pad", 0, 0, sub_req.state.settings.max_pad)
        chunked, plain = framings
        framing = chunked if request.version >= HttpVersion11 else plain
        channels = await open_channels(sub_req)
        response = web.StreamResponse(headers=HEADERS)
        response.content_type = content_type
        response.force_close()  # announced up front: clients must not reuse a held connection
        await response.prepare(request)
        # The first write sends the headers; from here on everything goes to the transport.
        await response.write(framing.comment(b" " * pad))
        sub, events = begin(
            sub_req, channels, HeldStream, request.transport, framing, sub_req.state
        )
        handed = take_over(request, sub_req, sub, events)
    finally:
        sub_req.release()
    return response if handed is None else handed
