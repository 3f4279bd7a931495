"""A request body as it arrives: delimited by `Content-Length` or chunked transfer coding
(decoded by h11, RFC 9112 section 7.1), decompressed when its content coding is gzip or
deflate (zlib, RFC 9110 section 8.4.1), and bounded.

`Body.feed` takes the body's part of the bytes a client sent and gives back what follows it,
so a connection reading pipelined requests hands the rest to the next one. The limit counts
the body as published, after decompression: a small compressed body that inflates past it is
refused as it inflates, never held whole (zlib's `max_length`). With `passed`, the raw bytes
go on as they are (to a parser that reads the body itself) and only the body's end is found.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import h11

from ...core.errors import InvalidInput, PushError, TooLarge

CHUNKED_HEAD = b"POST / HTTP/1.1\r\nHost: -\r\nTransfer-Encoding: chunked\r\n\r\n"
"""What h11 is told of a chunked request: it only decodes the body (the head is llhttp's)."""
GZIP = 16 + zlib.MAX_WBITS
"""zlib's window bits for a gzip stream (its header and trailer checked)."""
CODINGS: dict[str, int | None] = {"identity": None, "gzip": GZIP, "x-gzip": GZIP, "deflate": 0}
"""The content codings read, and zlib's window bits for each (0: deflate, chosen by its first
byte: a zlib stream as RFC 9110 says, or the raw deflate some clients send, as aiohttp does).
A refusal of another names them (`errors.ACCEPT_ENCODING`, RFC 9110 section 12.5.3)."""


class Inflate(Protocol):
    """What a zlib decompression object is to a body."""

    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes: ...


def coding_of(value: str | None) -> str | None:
    """The content coding a `Content-Encoding` value names, lower-cased (None for none)."""
    if value is None:
        return None
    coding = value.strip().lower()
    return None if coding in ("", "identity") else coding


def too_large(limit: int) -> TooLarge:
    return TooLarge("too_large", f"message body is larger than {limit} bytes")


class Body:
    """One request's body, at most `limit` bytes once decoded (unbounded when `passed`)."""

    __slots__ = (
        "chunked",
        "chunks",
        "failure",
        "inflate",
        "left",
        "limit",
        "passed",
        "size",
        "wbits",
    )

    def __init__(
        self,
        length: int,
        limit: int,
        coding: str | None = None,
        passed: Callable[[bytes], None] | None = None,
    ) -> None:
        """`length` is the head's `Content-Length`, or -1 for a chunked body; `coding` one of
        `CODINGS` (the caller refuses any other)."""
        self.limit = limit
        self.passed = passed
        self.chunks: list[bytes] = []
        self.size = 0
        self.failure: PushError | None = None
        self.wbits = CODINGS[coding] if coding is not None else None
        self.inflate: Inflate | None = None
        self.chunked: h11.Connection | None = None
        self.left = length
        """Bytes still to come of a Content-Length body; 0 once the body is whole."""
        if length < 0:
            self.chunked = h11.Connection(h11.SERVER)
            self.chunked.receive_data(CHUNKED_HEAD)
        elif length > limit and passed is None and self.wbits is None:
            self.failure = too_large(limit)

    @property
    def whole(self) -> bool:
        """Whether all of it was read (refused or not): what follows is the next request."""
        return self.left == 0

    @property
    def over(self) -> bool:
        """Whether nothing more of it is to be read: whole, or refused part way."""
        return self.left == 0 or self.failure is not None

    def feed(self, data: bytes) -> bytes:
        """Take the body's part of `data`; returns what follows the body."""
        if self.failure is not None or not self.left or not data:
            return data  # (no bytes is not an end: h11 would take it for the client's close)
        if self.chunked is None:
            part, rest = data[: self.left], data[self.left :]
            self.left -= len(part)
            self._take(part, part)
            if not self.left:
                self._end()
            return rest
        self.chunked.receive_data(data)
        try:
            while True:
                event = self.chunked.next_event()
                if event is h11.NEED_DATA:
                    self._pass(data)
                    return b""
                if isinstance(event, h11.Data):
                    self._take(bytes(event.data), b"")
                    if self.failure is not None:
                        return b""
                elif isinstance(event, h11.EndOfMessage):
                    self.left = 0
                    rest = bytes(self.chunked.trailing_data[0])
                    self._pass(data[: len(data) - len(rest)])
                    self._end()
                    return rest
        except h11.RemoteProtocolError:
            self._pass(data)  # a parser reading it itself finds the fault and answers it
            self._fail(InvalidInput("bad_request", "malformed chunked request body"))
            return b""

    def _pass(self, raw: bytes) -> None:
        if self.passed is not None and raw:
            self.passed(raw)

    def _take(self, part: bytes, raw: bytes) -> None:
        """Keep `part` of the body (decoded from its transfer coding), or pass `raw` on."""
        if self.passed is not None:
            self._pass(raw)
            return
        if self.wbits is not None:
            part = self._inflate(part)
        self.chunks.append(part)
        self.size += len(part)
        if self.size > self.limit:
            self._fail(too_large(self.limit))

    def _inflate(self, part: bytes) -> bytes:
        inflate = self.inflate
        if inflate is None:
            wbits = self.wbits or (zlib.MAX_WBITS if part[:1] and part[0] & 0x0F == 8 else -15)
            inflate = self.inflate = zlib.decompressobj(wbits)
        try:
            # One byte past the room left is enough to know the body is too large.
            return inflate.decompress(part, self.limit - self.size + 1)
        except zlib.error:
            self._fail(InvalidInput("bad_request", "the body is not valid for its content coding"))
            return b""

    def _end(self) -> None:
        if self.inflate is not None and not self.inflate.eof and self.failure is None:
            self._fail(InvalidInput("bad_request", "the compressed body ends before its end"))

    def _fail(self, exc: PushError) -> None:
        """Refuse the body: nothing more of it is read (`whole` says whether all of it was)."""
        if self.failure is None:
            self.failure = exc

    def take(self) -> bytes:
        """The body once `whole`; raises its refusal (413, 400)."""
        if self.failure is not None:
            raise self.failure
        return b"".join(self.chunks)
