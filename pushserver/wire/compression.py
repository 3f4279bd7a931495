"""Compression that keeps encode-once: a frame is deflated once, however many get it.

Each frame is deflated by a fresh compressor and ended with a sync flush, so its bytes are
byte-aligned, not final, and refer to nothing before them: they can be appended to any deflate
stream, every gzip response and permessage-deflate connection alike. A frame is also deflated
once against the frame before it in its chain (a channel's frames of one framing), with that
frame as zlib's preset dictionary: a decoder whose output so far ends with that frame reads the
block exactly as if one compressor had written both, since its window holds what the dictionary
held. So a connection that got the frame before (and only heartbeats since) receives the
envelope's field names, the channel, most of the cursor and of the payload as back-references,
and any other gets the frame on its own. A connection keeps only which frame it got last and how
many heartbeats followed it, and a gzip stream the CRC-32 and length its trailer needs.
`scripts/compression_schemes.py` measures this scheme against the others and its settings.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple

from websockets.exceptions import InvalidHeader, NegotiationError
from websockets.extensions.permessage_deflate import (
    PerMessageDeflate,
    ServerPerMessageDeflateFactory,
)
from websockets.headers import build_extension, parse_extension

LEVEL = 6
"""zlib's default level: on frames of a few hundred bytes levels 6 and 9 give the same bytes."""
WINDOW_BITS = 10
"""A 1 KiB window holds the frame before (zlib uses a dictionary's last 762 bytes here) and is
cheap to set up; a permessage-deflate client is told so (`server_max_window_bits`) and may keep a
window that small. A 512-byte window loses most of a 250-byte frame's dictionary."""
MEM_LEVEL = 4
"""zlib's hash table size: larger ones find nothing more in frames this small."""

SYNC_TAIL = b"\x00\x00\xff\xff"
"""The empty stored block a sync flush ends with; permessage-deflate leaves it off the wire."""
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""RFC 1952: deflate, no name, no time, unknown OS. A gzip stream's first bytes, sent with the
head so that a decoder which reads the header before anything else is not kept waiting."""
FINAL_BLOCK = b"\x03\x00"
"""An empty final block (fixed Huffman, BFINAL set): ends a deflate stream after a sync flush."""
GZIP_MIN_BYTES = 512
"""One-shot answers shorter than this go out as they are: a one-message long-poll answer (about
260 bytes) loses only 15-28 % to gzip, less after the head lines it adds, for 5 µs of CPU; from
two messages on it loses 45-55 %, twenty messages 82-88 %."""
BODY_WINDOW_BITS = 12
"""A one-shot answer's window: neighbouring envelopes are within 4 KiB, and on answers of up to
twenty messages a 32 KiB window finds nothing more."""


def deflate(data: bytes, after: bytes = b"") -> bytes:
    """Raw deflate of `data`, sync-flushed: valid anywhere in a deflate stream or, with
    `after`, wherever the decoder's output so far ends with `after`."""
    if after:
        compressor = zlib.compressobj(
            LEVEL, zlib.DEFLATED, -WINDOW_BITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, after
        )
    else:
        compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -WINDOW_BITS, MEM_LEVEL)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


class Coding:
    """What one framing's compressed frames share: how a deflate block goes on the wire
    (`wrap`: chunked transfer, a WebSocket frame) and the heartbeat that may come between two
    frames (none on WebSocket, whose pings do not touch the deflate window)."""

    __slots__ = ("heartbeat", "heartbeat_block", "wrap")

    def __init__(self, wrap: Callable[[bytes], bytes], heartbeat: bytes = b"") -> None:
        self.wrap = wrap
        self.heartbeat = heartbeat
        self.heartbeat_block = wrap(deflate(heartbeat)) if heartbeat else b""


class Deflated:
    """One frame as every connection gets it, each form made once, when first asked for: on
    its own, or after `before` (the frame before it in its chain) and some heartbeats.

    It holds the frame before by its bytes, not by its `Deflated`, so a chain keeps no more
    than two frames alive."""

    __slots__ = ("before", "coding", "data", "forms")

    def __init__(self, data: bytes, before: bytes | None, coding: Coding) -> None:
        self.data = data
        self.before = before
        self.coding = coding
        self.forms: dict[int, bytes] = {}
        """The forms made so far: -1 alone, n after `before` and n heartbeats."""

    @property
    def alone(self) -> bytes:
        return self.after(-1)

    def after(self, beats: int) -> bytes:
        """The form for a connection whose output ends with `before` and `beats` heartbeats
        (-1: the form for any connection)."""
        before = self.before
        if before is None:
            beats = -1
        form = self.forms.get(beats)
        if form is None:
            if before is None or beats < 0:
                block = deflate(self.data)
            else:
                tail = before + self.coding.heartbeat * beats
                block = deflate(self.data, tail[-(1 << WINDOW_BITS) :])
            form = self.forms[beats] = self.coding.wrap(block)
        return form


class Chain:
    """The frames of one sequence (a channel's, of one framing), each deflated against the one
    before it."""

    __slots__ = ("coding", "last")

    def __init__(self, coding: Coding) -> None:
        self.coding = coding
        self.last: bytes | None = None

    def add(self, data: bytes) -> Deflated:
        frame = Deflated(data, self.last, self.coding)
        self.last = data
        return frame


class Receiver:
    """One connection's place in its chain: the frame it got last (by identity: a shared frame
    is one bytes object for all its subscribers) and the heartbeats it got since."""

    __slots__ = ("beats", "coding", "last")

    def __init__(self, coding: Coding) -> None:
        self.coding = coding
        self.last: bytes | None = None
        self.beats = 0

    def take(self, frame: Deflated) -> bytes:
        """The bytes that carry `frame` here: chained when this connection got the frame
        before it, else on its own. (The fan-out's loop: a form already made is looked up.)"""
        form = self.beats if self.last is frame.before else -1
        out = frame.forms.get(form) or frame.after(form)
        self.last = frame.data
        self.beats = 0
        return out

    def own(self, data: bytes) -> bytes:
        """A frame for this connection alone (its own cursor, a control event), deflated here
        against what it got last."""
        return self.take(Deflated(data, self.last, self.coding))

    def beat(self) -> bytes:
        """A heartbeat, which keeps the chain: the next frame is deflated after it."""
        self.beats += 1
        return self.coding.heartbeat_block


class LoneReceiver(Receiver):
    """A connection that gets every frame on its own: a permessage-deflate client that asked
    for `server_no_context_takeover` (its window is emptied after each message)."""

    __slots__ = ()

    def take(self, frame: Deflated) -> bytes:
        return frame.forms.get(-1) or frame.after(-1)

    def own(self, data: bytes) -> bytes:
        return self.coding.wrap(deflate(data))


class GzipStream(Receiver):
    """A held response with `Content-Encoding: gzip`: `GZIP_HEADER` first, then each frame's
    deflate blocks, and, when the server ends the stream, `end()`: the trailer needs the CRC-32
    and the length of everything sent, kept here. A stream cut before its trailer has still
    delivered every frame it carried."""

    __slots__ = ("crc", "size")

    def __init__(self, coding: Coding) -> None:
        super().__init__(coding)
        self.crc = 0
        self.size = 0

    def take(self, frame: Deflated) -> bytes:
        data = frame.data
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return Receiver.take(self, frame)  # not super(): the lookup costs a fifth of the call

    def beat(self) -> bytes:
        heartbeat = self.coding.heartbeat
        self.crc = zlib.crc32(heartbeat, self.crc)
        self.size += len(heartbeat)
        return Receiver.beat(self)

    def start(self, data: bytes) -> bytes:
        """`GZIP_HEADER` and the stream's first bytes (`data`), in one piece: a proxy that
        passes a response's first chunk and holds the rest back still passes a start the client
        decodes, and a decoder reading the header first is not kept waiting."""
        wrap = self.coding.wrap
        return self.take(Deflated(data, None, Coding(lambda block: wrap(GZIP_HEADER + block))))

    def end(self) -> bytes:
        """The final block and the trailer: after them the body is one complete gzip member."""
        return FINAL_BLOCK + struct.pack("<II", self.crc, self.size & 0xFFFFFFFF)


def permessage_deflate(block: bytes) -> bytes:
    """A sync-flushed deflate block as a permessage-deflate message payload (RFC 7692 §7.2.1:
    the empty stored block that ends it is left off)."""
    if not block.endswith(SYNC_TAIL):
        raise ValueError("not a sync-flushed deflate block")
    return block[: -len(SYNC_TAIL)]


def gzip_body(body: bytes) -> bytes:
    """A whole answer (a long-poll's, JSONP's) as one gzip member; `GZIP_MIN_BYTES` says
    from what size it pays."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, 16 + BODY_WINDOW_BITS, MEM_LEVEL)
    return compressor.compress(body) + compressor.flush()


# -- permessage-deflate negotiation (RFC 7692) --------------------------------------------

_NEGOTIATOR = ServerPerMessageDeflateFactory(
    client_no_context_takeover=True,
    server_max_window_bits=WINDOW_BITS,
    compress_settings={"memLevel": 1},
)
"""Checks an offer and words the answer. It also builds an extension object with a compressor
of its own, which is dropped: the server's messages are deflated here, once for everyone (its
settings only keep that throwaway cheap)."""


class Accepted(NamedTuple):
    """The permessage-deflate a client's offer allows."""

    header: str
    """The `Sec-WebSocket-Extensions` answer."""
    chained: bool
    """Whether messages may be chained (context takeover); False when the client asked for
    `server_no_context_takeover`: every message then goes on its own."""


def accept_permessage_deflate(offers: str) -> Accepted | None:
    """The first acceptable permessage-deflate offer in a `Sec-WebSocket-Extensions` header.

    The answer always sets `client_no_context_takeover` (a client's rare compressed message is
    inflated alone, so a connection keeps no inflate window) and `server_max_window_bits` at
    `WINDOW_BITS`. An offer that limits the server's window below that is declined, as is a
    malformed header: the connection is then not compressed."""
    try:
        extensions = parse_extension(offers)
    except InvalidHeader:
        return None
    for name, params in extensions:
        if name != _NEGOTIATOR.name:
            continue
        try:
            answer, extension = _NEGOTIATOR.process_request_params(params, [])
        except NegotiationError:
            continue
        if extension.local_max_window_bits < WINDOW_BITS:
            continue
        return Accepted(build_extension([(name, answer)]), not extension.local_no_context_takeover)
    return None


def inbound_deflate() -> PerMessageDeflate:
    """What reads a client's compressed messages (RSV1) on a connection that negotiated
    permessage-deflate: each inflated alone, as `client_no_context_takeover` says. Its own
    compressing side is never used and so never set up."""
    return PerMessageDeflate(
        remote_no_context_takeover=True,
        local_no_context_takeover=True,
        remote_max_window_bits=15,
        local_max_window_bits=WINDOW_BITS,
    )
