"""How each kind of held connection frames an envelope, and the long-poll answer's body.

Bytes in, bytes out: the hub frames each message once per framing and writes the same bytes to
every subscriber of that framing.
"""

from __future__ import annotations

from typing import Final

from .compression import Coding, permessage_deflate
from .websocket import PING, RSV1, TEXT, ws_frame


class Framing:
    """How one kind of held connection frames an event, a heartbeat and chunked transfer.

    A framing's compressed twin (`compressed()`, made once) has the same name and events and a
    `coding`: the hub keeps its subscribers apart, deflates each of its frames once per form
    (`wire.compression`) and each of them takes the form that suits what it got last."""

    __slots__ = ("_twin", "chunked", "coding", "name")
    parts = False
    """Whether a message is sent in parts (`message`) rather than as its envelope."""

    def __init__(self, name: str, chunked: bool) -> None:
        self.name = name
        self.chunked = chunked
        self.coding: Coding | None = None
        """How its frames are compressed; None: they are not (every framing but a twin)."""
        self._twin: Framing | None = None

    def compressed(self) -> Framing:
        """The same framing, compressed: for the connections that negotiated it."""
        twin = self._twin
        if twin is None:
            twin = self._twin = self.__class__(self.name, self.chunked)
            twin.coding = self.make_coding()
        return twin

    def make_coding(self) -> Coding:
        """Deflate blocks in chunks (or as they are, unchunked), heartbeats between them."""
        return Coding(self.chunk, self.comment(b""))

    def units(self, events: list[bytes]) -> list[bytes]:
        """What is deflated, each on its own, from a batch of framed events: one piece of a
        byte stream (NDJSON, SSE), or each message (WebSocket)."""
        return [b"".join(events)]

    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        raise NotImplementedError

    def comment(self, text: bytes) -> bytes:
        """Bytes that carry no event: heartbeats and padding."""
        raise NotImplementedError

    def start(self, cursor: bytes) -> bytes:
        """Bytes that tell the client where the stream starts, before any event (none but SSE's)."""
        return b""

    def chunk(self, payload: bytes) -> bytes:
        """Wrap already-framed bytes for the wire: as one chunk of HTTP/1.1's chunked transfer
        coding (RFC 9112 section 7.1) for a chunked framing, as they are otherwise."""
        if self.chunked:
            return b"%x\r\n%b\r\n" % (len(payload), payload)
        return payload

    def message(self, body: bytes, cursor: bytes, channel: bytes, data: bytes) -> bytes:
        """A message's event: its envelope `body`, unless the framing sends its parts apart."""
        return self.event(body, cursor)


class NdjsonFraming(Framing):
    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        return body + b"\n"

    def comment(self, text: bytes) -> bytes:
        return text + b"\n"


class SseFraming(Framing):
    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        if cursor is None:
            return b"data: %b\n\n" % body
        return b"id: %b\ndata: %b\n\n" % (cursor, body)

    def comment(self, text: bytes) -> bytes:
        return b":%b\n\n" % text

    def start(self, cursor: bytes) -> bytes:
        """An `id:` with no `data:`: an EventSource takes it as its last event id without
        dispatching an event, so it resumes from the stream's start even when the connection
        drops before the first message."""
        return b"id: %b\n\n" % cursor


class SseCompactFraming(SseFraming):
    """SSE that sends a message's parts in the standard fields (`?compact=1`): the cursor in
    `id:`, the channel in `event:` and the payload alone in `data:`, so an EventSource resumes
    through `Last-Event-ID` as before and dispatches each channel's messages as events of that
    name. Control events keep the envelope framing as `message` events; so does a channel
    called `message`, whose events would otherwise look like them."""

    parts = True

    def message(self, body: bytes, cursor: bytes, channel: bytes, data: bytes) -> bytes:
        if channel == b"message":
            return self.event(body, cursor)
        return b"id: %b\nevent: %b\ndata: %b\n\n" % (cursor, channel, data)


class WebSocketFraming(Framing):
    """Unmasked server-to-client text frames, built once and written straight to the socket.
    Compressed (permessage-deflate), an event is the message's payload, framed once deflated
    (RSV1 set); pings carry nothing and do not touch the deflate window."""

    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        if self.coding is not None:
            return body
        return ws_frame(TEXT, body)

    def make_coding(self) -> Coding:
        return Coding(deflated_text)

    def units(self, events: list[bytes]) -> list[bytes]:
        return events

    def comment(self, text: bytes) -> bytes:
        return ws_frame(PING, b"")


def deflated_text(block: bytes) -> bytes:
    """A compressed text message: RSV1 set (RFC 7692 section 6)."""
    return ws_frame(RSV1 | TEXT, permessage_deflate(block))


NDJSON: Final = NdjsonFraming("stream", chunked=True)
NDJSON_PLAIN: Final = NdjsonFraming("stream", chunked=False)
SSE: Final = SseFraming("sse", chunked=True)
SSE_PLAIN: Final = SseFraming("sse", chunked=False)
SSE_COMPACT: Final = SseCompactFraming("sse", chunked=True)
SSE_COMPACT_PLAIN: Final = SseCompactFraming("sse", chunked=False)
WEBSOCKET: Final = WebSocketFraming("ws", chunked=False)


def longpoll_body(events: list[bytes], cursor: str, more: bool = False) -> bytes:
    """The long-poll answer: `{"messages": [...], "cursor": "..."}`, plus `"more":true` when
    it was cut short and more is already waiting after `cursor`."""
    tail = b',"more":true}' if more else b"}"
    return b'{"messages":[%b],"cursor":"%b"%b' % (b",".join(events), cursor.encode(), tail)
