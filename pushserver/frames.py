"""Messages and their wire encodings: every byte a subscriber receives is built here.

A message is encoded once per framing and the same bytes go to every subscriber of that framing.
Only a multi-channel subscription needs its own cursor text, so an envelope is kept as a shared
head (everything up to the cursor) plus the per-subscription cursor and a fixed tail.
"""

from __future__ import annotations

from typing import Any

import orjson

from .wire.websocket import PING, TEXT, ws_frame

ENVELOPE_TAIL = b'"}'


class Message:
    """One published message; `head` is the envelope up to its cursor, shared by all framings."""

    __slots__ = ("channel", "data", "epoch", "head", "id", "position", "seq", "ts")

    def __init__(self, channel: str, epoch: str, id: int, ts: float, data: bytes) -> None:
        self.channel = channel
        self.epoch = epoch
        self.id = id
        self.ts = ts
        self.data = data
        self.seq = 0
        """Arrival order on this server across channels, set by the hub; orders multi-channel
        deliveries the way they were published."""
        self.position = f"{channel}:{epoch}:{id}"
        self.head = b'{"channel":%b,"id":%d,"ts":%b,"data":%b,"cursor":"' % (
            orjson.dumps(channel),
            id,
            orjson.dumps(round(ts, 6)),
            data,
        )

    def body(self, cursor: bytes) -> bytes:
        """The envelope, carrying the subscription's cursor after this message."""
        return self.head + cursor + ENVELOPE_TAIL


class Gap:
    """Messages `first`..`last` of a channel that a subscriber cannot get, and why."""

    __slots__ = ("channel", "first", "last", "position", "reason")
    seq = -1
    """Gaps sort before every message of a backlog."""

    def __init__(self, channel: str, first: int, last: int, reason: str, position: str) -> None:
        self.channel = channel
        self.first = first
        self.last = last
        self.reason = reason
        self.position = position

    def body(self, cursor: bytes) -> bytes:
        return control(
            {
                "type": "gap",
                "channel": self.channel,
                "from": self.first,
                "to": self.last,
                "reason": self.reason,
                "cursor": cursor.decode(),
            }
        )


def control(event: dict[str, Any]) -> bytes:
    """A control event (gap, reconnect, expired) as JSON bytes."""
    return orjson.dumps(event)


class Framing:
    """How one kind of held connection frames an event, a heartbeat and chunked transfer."""

    __slots__ = ("chunked", "name")

    def __init__(self, name: str, chunked: bool) -> None:
        self.name = name
        self.chunked = chunked

    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        raise NotImplementedError

    def comment(self, text: bytes) -> bytes:
        """Bytes that carry no event: heartbeats and padding."""
        raise NotImplementedError

    def chunk(self, payload: bytes) -> bytes:
        """Wrap already-framed bytes for the wire (HTTP/1.1 chunked transfer when used)."""
        if self.chunked:
            return b"%x\r\n%b\r\n" % (len(payload), payload)
        return payload


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


class WebSocketFraming(Framing):
    """Unmasked server-to-client text frames, built once and written straight to the socket."""

    def event(self, body: bytes, cursor: bytes | None) -> bytes:
        return ws_frame(TEXT, body)

    def comment(self, text: bytes) -> bytes:
        return ws_frame(PING, b"")


NDJSON = NdjsonFraming("stream", chunked=True)
NDJSON_PLAIN = NdjsonFraming("stream", chunked=False)
SSE = SseFraming("sse", chunked=True)
SSE_PLAIN = SseFraming("sse", chunked=False)
WEBSOCKET = WebSocketFraming("ws", chunked=False)


def longpoll_body(events: list[bytes], cursor: str) -> bytes:
    """The long-poll answer: `{"messages": [...], "cursor": "..."}`."""
    return b'{"messages":[%b],"cursor":"%b"}' % (b",".join(events), cursor.encode())
