"""A held HTTP response (NDJSON stream or SSE) that the fan-out writes to directly.

The front end checks the request and sends the status line, headers and padding; then a
`HeldStream` is the connection's protocol until the client leaves or the server ends it. A
`HeldKind` is what one such transport adds: its name, media type, framings and where its
cursor comes from; `held_transport` makes its registry record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ...wire.compression import GzipStream
from ...wire.framing import Framing
from ..http.coding import GZIP, VARY, accepts
from ..http.request import RequestHead
from ..state import ServerState
from . import probe
from .common import (
    HeldSubscriber,
    begin,
    int_param,
    open_channels,
    parse_subscribe,
    subscribe_request,
    take_over,
)
from .exchange import Headers, Transport

if TYPE_CHECKING:
    from .exchange import Exchange

HEADERS: Final = [("Cache-Control", "no-cache, no-store"), ("X-Accel-Buffering", "no")]
LAST_CHUNK: Final = b"0\r\n\r\n"


class HeldStream(HeldSubscriber):
    """A held NDJSON or SSE stream; what it receives is ignored. Compressed (`coder`), its
    body is one gzip member: the header first, the trailer when the server ends it."""

    __slots__ = ()

    def data_received(self, data: bytes) -> None:
        """A held stream's client has nothing to say; a pipelined request is not answered."""

    def end(self) -> None:
        """Finish the body as aiohttp would (the last chunk) and close once it is sent."""
        transport = self.transport
        if not transport.is_closing():
            coder = self.coder
            if isinstance(coder, GzipStream):
                transport.write(self.framing.chunk(coder.end()))
            if self.framing.chunked:
                transport.write(LAST_CHUNK)
            transport.close()


def query_cursor(head: RequestHead) -> str:
    """Where a subscription resumes: its `?cursor=`."""
    return head.query.get("cursor", "")


@dataclasses.dataclass(frozen=True, slots=True)
class HeldKind:
    """One kind of held response: its transport's name, media type, framings (chunked for
    HTTP/1.1, plain for HTTP/1.0), where a request's cursor comes from, and the framings
    `?compact=1` asks for (if it has them)."""

    name: str
    content_type: str
    chunked: Framing
    plain: Framing
    cursor: Callable[[RequestHead], str] = query_cursor
    compact: tuple[Framing, Framing] | None = None

    def headers(self, gzip: bool) -> Headers:
        """The head's headers; a gzip stream's vary with what the request accepts."""
        headers = [*HEADERS, ("Content-Type", self.content_type)]
        if gzip:
            headers += (GZIP, VARY)
        return headers

    def framing(self, state: ServerState, head: RequestHead) -> Framing:
        """How this request's events go out: its version's framing (compact when asked for
        and offered), compressed when the server and the request allow it."""
        chunked, plain = self.chunked, self.plain
        if self.compact is not None and head.query.get("compact") == "1":
            chunked, plain = self.compact
        framing = chunked if head.version == "1.1" else plain
        if state.settings.compress and accepts(head.headers.get("accept-encoding")).gzip:
            return framing.compressed()
        return framing

    async def serve(self, conn: Exchange, head: RequestHead) -> None:
        """Check the request, send the head and padding, and make a `HeldStream` the
        protocol."""
        state = conn.state
        sub_req = subscribe_request(state, head, conn.remote(head), self.name, self.cursor(head))
        try:
            pad = int_param(head.query, "pad", 0, 0, state.settings.max_pad)
            framing = self.framing(state, head)
            coding = framing.coding
            start = await open_channels(sub_req)
            handed = conn.hand_over(head, 200, self.headers(coding is not None), framing.chunked)
            if handed is None:
                return
            transport = handed[0]  # what the client sends after this request is not read
            coder = None if coding is None else GzipStream(coding)
            sub, events = begin(start, HeldStream, transport, framing, state, coder)
            opening = framing.comment(b" " * pad) + framing.start(start.at.encode())
            transport.write(sub.wire([opening]) if coder is None else coder.start(opening))
            take_over(transport, sub_req, sub, events)
        finally:
            sub_req.release()

    def probe(self, conn: Exchange, head: RequestHead) -> Headers:
        """The checks of `serve`, in its order, nothing held."""
        state = conn.state
        parsed = parse_subscribe(state, head, self.name)
        positions = probe.check_reserve(conn, head, parsed, self.cursor(head))
        int_param(head.query, "pad", 0, 0, state.settings.max_pad)
        probe.check_open(state, parsed, positions)
        return self.headers(self.framing(state, head).coding is not None)


def held_transport(segment: str, kind: HeldKind) -> Transport:
    """The registry record of a held-response transport."""
    framings = (kind.chunked, kind.plain, *(kind.compact or ()))
    return Transport(segment, kind.name, kind.serve, kind.probe, framings)
