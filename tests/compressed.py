"""Compressed answers as the server's scheme builds them (`pushserver.wire.compression`), in
steps, for tests that feed them to real decoders and clients through `tests.lockstep`.

Every form the scheme has is in them: a frame on its own, one chained to the frame before, one
chained across heartbeats, a frame of the connection's own, a frame after one it missed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pushserver.core.messages import Message
from pushserver.wire.compression import (
    GZIP_HEADER,
    Chain,
    Coding,
    GzipStream,
    Receiver,
    accept_permessage_deflate,
    permessage_deflate,
)
from pushserver.wire.framing import NDJSON, SSE, Framing
from pushserver.wire.websocket import PING, TEXT, ws_frame

from .lockstep import LAST_CHUNK

EPOCH = "70f05dee1"
CHANNEL = "prices.AAPL"
MULTI = f"{CHANNEL}:{EPOCH}:4,scores.epl:{EPOCH}:9"
"""The cursor of the connection's own frame: a multi-channel subscription's."""


@dataclass
class Step:
    data: bytes
    marker: str | None = None
    """What the client reports once it has this step's message (its cursor), if any."""


def message(n: int) -> Message:
    data = b'{"symbol":"AAPL","price":%d.%02d,"volume":%d,"exchange":"NASDAQ"}' % (
        187 + n % 3,
        n * 7 % 100,
        48213377 + n * 1000,
    )
    return Message(CHANNEL, EPOCH, n, 1795375692.833052 + n, data)


def cursor(n: int) -> str:
    return f"{CHANNEL}:{EPOCH}:{n}"


FRAMINGS: dict[str, Framing] = {"sse": SSE, "stream": NDJSON}
ACCEPT = {"sse": "text/event-stream", "stream": "application/x-ndjson"}
CONTENT_TYPE = {"sse": "text/event-stream", "stream": "application/x-ndjson"}


def gzip_stream(kind: str) -> tuple[bytes, list[Step], bytes]:
    """The head, the steps and the end (trailer and last chunk) of a gzip-encoded held stream
    of `kind` ("sse" or "stream") carrying messages 1, 2, 3, 5, 6 and one of its own."""
    framing = FRAMINGS[kind]
    coding = Coding(framing.chunk, framing.comment(b""))
    chain = Chain(coding)
    frames = []
    for n in range(1, 7):
        c = cursor(n).encode()
        frames.append(chain.add(framing.event(message(n).body(c), c)))
    stream = GzipStream(coding)
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: %b\r\nCache-Control: no-cache, no-store\r\n"
        b"Content-Encoding: gzip\r\nVary: Accept-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n"
        % CONTENT_TYPE[kind].encode()
    )
    start = framing.start(cursor(0).encode())
    first = framing.chunk(GZIP_HEADER) + (stream.own(start) if start else b"")
    own = framing.event(message(4).body(MULTI.encode()), MULTI.encode())
    steps = [
        Step(first),
        Step(stream.take(frames[0]), cursor(1)),
        Step(stream.take(frames[1]), cursor(2)),
        Step(stream.beat() + stream.beat()),
        Step(stream.take(frames[2]), cursor(3)),
        Step(stream.own(own), MULTI),
        Step(stream.take(frames[4]), cursor(5)),  # the frame before it went elsewhere
        Step(stream.take(frames[5]), cursor(6)),
    ]
    assert steps[2].data == frames[1].after(0) != frames[1].alone
    assert steps[4].data == frames[2].after(2) != frames[2].after(0)
    assert steps[6].data == frames[4].alone
    return head, steps, framing.chunk(stream.end()) + LAST_CHUNK


def websocket_frames(offers: str) -> tuple[str, list[Step]]:
    """The `Sec-WebSocket-Extensions` answer to `offers` and the frames of messages 1, 2, 3,
    5, 6 and one of the connection's own, with a ping among them."""
    accepted = accept_permessage_deflate(offers)
    assert accepted is not None and accepted.chained, offers

    def wrap(block: bytes) -> bytes:
        return ws_frame(0x40 | TEXT, permessage_deflate(block))

    coding = Coding(wrap)
    chain = Chain(coding)
    frames = [chain.add(message(n).body(cursor(n).encode())) for n in range(1, 7)]
    receiver = Receiver(coding)
    steps = [
        Step(receiver.take(frames[0]), cursor(1)),
        Step(receiver.take(frames[1]), cursor(2)),
        Step(ws_frame(PING, b"")),
        Step(receiver.take(frames[2]), cursor(3)),
        Step(receiver.own(message(4).body(MULTI.encode())), MULTI),
        Step(receiver.take(frames[4]), cursor(5)),
        Step(receiver.take(frames[5]), cursor(6)),
    ]
    assert steps[1].data == frames[1].after(0) != frames[1].alone
    return accepted.header, steps
