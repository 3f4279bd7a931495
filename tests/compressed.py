"""Compressed answers as the server's scheme builds them (`pushserver.wire.compression`), in
steps, for tests that feed them to real decoders and clients through `tests.lockstep`.

Every form the scheme has is in them: a frame on its own, one chained to the frame before, one
chained across heartbeats, a frame of the connection's own, a frame after one it missed.
"""

from __future__ import annotations

import base64
import itertools
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

from pushserver.core.messages import Message
from pushserver.wire.compression import (
    GZIP_HEADER,
    SYNC_TAIL,
    Chain,
    Coding,
    GzipStream,
    Receiver,
    accept_permessage_deflate,
    gzip_body,
    permessage_deflate,
)
from pushserver.wire.framing import NDJSON, SSE, SSE_COMPACT, Framing, longpoll_body
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


FRAMINGS: dict[str, Framing] = {"sse": SSE, "stream": NDJSON, "sse-compact": SSE_COMPACT}
ACCEPT = {"sse": "text/event-stream", "stream": "application/x-ndjson"}
CONTENT_TYPE = {**ACCEPT, "sse-compact": "text/event-stream"}


def gzip_stream(kind: str, chunked: bool = True) -> tuple[bytes, list[Step], bytes]:
    """The head, the steps and the end (trailer and last chunk) of a gzip-encoded held stream
    of `kind` ("sse", "stream", "sse-compact") carrying messages 1, 2, 3, 5, 6 and one of its own;
    without `chunked`, the steps are the content-coded body alone (no transfer framing)."""
    framing = FRAMINGS[kind]
    wrap = framing.chunk if chunked else _same
    coding = Coding(wrap, framing.comment(b""))
    chain = Chain(coding)
    frames = [chain.add(framed(framing, message(n), cursor(n).encode())) for n in range(1, 7)]
    stream = GzipStream(coding)
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: %b\r\nCache-Control: no-cache, no-store\r\n"
        b"Content-Encoding: gzip\r\nVary: Accept-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n"
        % CONTENT_TYPE[kind].encode()
    )
    start = framing.start(cursor(0).encode())
    first = wrap(GZIP_HEADER) + (stream.own(start) if start else b"")
    own = framed(framing, message(4), MULTI.encode())
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
    return head, steps, wrap(stream.end()) + (LAST_CHUNK if chunked else b"")


def _same(data: bytes) -> bytes:
    return data


def framed(framing: Framing, m: Message, at: bytes) -> bytes:
    return framing.message(m.body(at), at, m.channel.encode(), m.data)


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


# -- conformance transcripts ----------------------------------------------------------------

SOURCE = "built by the server's scheme, pushserver.wire.compression (python -m tests.compressed)"


def _expected(uncompressed: bytes, kind: str) -> list[dict[str, object]]:
    """The events complete in `uncompressed`, in the transcripts' notation (envelopes only)."""
    if kind == "sse":
        events = uncompressed.split(b"\n\n")[:-1]
        lines = [e.partition(b"data: ")[2] for e in events if b"data: " in e]
    else:
        lines = [line for line in uncompressed.split(b"\n")[:-1] if line.strip()]
    return [{"message": json.loads(line)} for line in lines]


def _pieces(steps: list[bytes]) -> list[int]:
    """Split points: every step's end, and one inside each step of more than two bytes."""
    points, at = [], 0
    for data in steps:
        if len(data) > 2:
            points.append(at + len(data) // 2)
        at += len(data)
        points.append(at)
    return points[:-1]


def gzip_transcript(kind: str, end: str) -> dict[str, object]:
    _, steps, ending = gzip_stream(kind, chunked=False)
    parts = [step.data for step in steps] + ([ending] if end == "complete" else [])
    body = b"".join(parts)
    splits = _pieces(parts)
    decoder = zlib.decompressobj(31)
    decoded, delivered = b"", []
    for start, stop in itertools.pairwise([0, *splits, len(body)]):
        decoded += decoder.decompress(body[start:stop])
        delivered.append(len(_expected(decoded, kind)))
    wire = {"sse": "sse", "stream": "ndjson"}[kind]
    ended = (
        "then the trailer and the end of the body"
        if end == "complete"
        else "and the connection is cut before the trailer"
    )
    return {
        "case": f"{wire}-gzip-{end}",
        "kind": wire,
        "about": (
            "Content-Encoding: gzip, a deflate block flushed per message: alone, chained to the "
            "message before, chained across two heartbeats, the connection's own (multi-channel "
            f"cursor), alone again after a message that went elsewhere; {ended}"
        ),
        "source": SOURCE,
        "content_encoding": "gzip",
        "body_base64": base64.b64encode(body).decode(),
        "splits": splits,
        "delivered": delivered,
        "end": end,
        "expect": _expected(decoded, kind),
    }


def longpoll_transcript() -> dict[str, object]:
    events = [message(n).body(cursor(n).encode()) for n in range(1, 21)]
    body = longpoll_body(events, cursor(20))
    return {
        "case": "longpoll-gzip",
        "kind": "longpoll",
        "about": "a backlog of 20 messages answered with Content-Encoding: gzip",
        "source": SOURCE,
        "content_encoding": "gzip",
        "body_base64": base64.b64encode(gzip_body(body)).decode(),
        "expect": [
            *({"message": json.loads(e)} for e in events),
            {"checkpoint": cursor(20)},
        ],
    }


def websocket_transcript() -> dict[str, object]:
    offers = "permessage-deflate; client_max_window_bits"
    answer, steps = websocket_frames(offers)
    # compressed text frames (FIN, RSV1, text) under 64 KiB: a 7-bit or a 16-bit length
    frames = [step.data for step in steps if step.data[0] == 0xC1]
    payloads = [f[4:] if f[1] == 126 else f[2:] for f in frames]
    return {
        "case": "websocket-deflate",
        "kind": "websocket",
        "about": (
            "permessage-deflate with context takeover: messages alone, chained to the one "
            "before, the connection's own, alone after one that went elsewhere"
        ),
        "source": SOURCE,
        "extensions": answer,
        "frames_base64": [base64.b64encode(p).decode() for p in payloads],
        "expect": [
            {"message": json.loads(inflated)} for inflated in _inflate_with_takeover(payloads)
        ],
    }


def _inflate_with_takeover(payloads: list[bytes]) -> list[bytes]:
    decoder = zlib.decompressobj(-15)
    return [decoder.decompress(p + SYNC_TAIL) for p in payloads]


def transcripts() -> list[dict[str, object]]:
    return [
        gzip_transcript("sse", "complete"),
        gzip_transcript("stream", "cut"),
        longpoll_transcript(),
        websocket_transcript(),
    ]


if __name__ == "__main__":
    folder = Path(__file__).parent / "conformance"
    for case in transcripts():
        text = json.dumps(case, indent=2, ensure_ascii=False) + "\n"
        (folder / f"{case['case']}.json").write_text(text, "utf-8")
