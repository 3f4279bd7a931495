"""A held HTTP response (NDJSON stream or SSE) that the fan-out writes to directly.

The front end checks the request and sends the status line, headers and padding; then a
`HeldStream` is the connection's protocol until the client leaves or the server ends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...wire.framing import Framing
from ..front.head import RequestHead
from .common import HeldSubscriber, begin, int_param, open_channels, subscribe_request, take_over

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol

HEADERS = [("Cache-Control", "no-cache, no-store"), ("X-Accel-Buffering", "no")]
LAST_CHUNK = b"0\r\n\r\n"


class HeldStream(HeldSubscriber):
    """A held NDJSON or SSE stream; what it receives is ignored."""

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
    conn: FrontProtocol,
    head: RequestHead,
    kind: str,
    content_type: str,
    framings: tuple[Framing, Framing],
    cursor: str | None = None,
) -> None:
    """Check the request, send the head and padding, and make a `HeldStream` the protocol."""
    state = conn.front.state
    sub_req = subscribe_request(state, head, conn.remote(head), kind, cursor)
    try:
        pad = int_param(head.query, "pad", 0, 0, state.settings.max_pad)
        chunked, plain = framings
        framing = chunked if head.version == "1.1" else plain
        start = await open_channels(sub_req)
        headers = [*HEADERS, ("Content-Type", content_type)]
        transport = conn.open_stream(head, 200, headers, framing.chunked)
        if transport is None:
            return
        sub, events = begin(start, HeldStream, transport, framing, state)
        where = framing.start(start.at.encode())
        transport.write(framing.chunk(framing.comment(b" " * pad) + where))
        take_over(transport, sub_req, sub, events)
    finally:
        sub_req.release()
