"""WebSocket frames (RFC 6455, section 5): the server's frames, built once for every
subscriber, and the frames a subscriber sends, read incrementally.

A subscriber only listens, so what it sends is a ping to answer, a pong, a close, or a data
frame the server ignores. aiohttp's frame reader is bound to its internal message queue and
cannot be used on a connection it no longer owns, hence this small one: it checks what the RFC
requires of a client frame, unmasks control payloads (at most 125 bytes) and skips data.
"""

from __future__ import annotations

import struct

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
OPCODES = frozenset((CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG))
MAX_FRAME = 64 << 10
"""Largest frame accepted (as aiohttp's `max_msg_size` was); more is closed with 1009."""


def frame(opcode: int, payload: bytes) -> bytes:
    """A whole unmasked server frame."""
    n = len(payload)
    first = 0x80 | opcode
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


def close_frame(code: int, reason: bytes = b"") -> bytes:
    return frame(CLOSE, code.to_bytes(2, "big") + reason[:123])


class FrameError(Exception):
    """A frame breaks the protocol; the connection is closed with `code`."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def client_frames(buf: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """The whole frames at the start of `buf` as (opcode, payload), and the bytes left over.

    Payloads are unmasked for control frames and empty for data frames, which are skipped.
    """
    frames: list[tuple[int, bytes]] = []
    pos, size = 0, len(buf)
    while size - pos >= 2:
        first, second = buf[pos], buf[pos + 1]
        opcode, length, head = first & 0x0F, second & 0x7F, 2
        if opcode not in OPCODES:
            raise FrameError(1002, f"unknown opcode {opcode:#x}")
        if first & 0x70:
            raise FrameError(1002, "no extension was negotiated")
        if not second & 0x80:
            raise FrameError(1002, "client frames must be masked")
        if length == 126:
            if size - pos < 4:
                break
            length, head = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 4
        elif length == 127:
            if size - pos < 10:
                break
            length, head = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 10
        if opcode >= CLOSE and (length > 125 or not first & 0x80):
            raise FrameError(1002, "control frames must be whole and at most 125 bytes")
        if length > MAX_FRAME:
            raise FrameError(1009, f"frames larger than {MAX_FRAME} bytes are not accepted")
        start = pos + head + 4
        end = start + length
        if end > size:
            break
        payload = b""
        if opcode >= CLOSE:
            mask = buf[pos + head : start]
            payload = bytes(b ^ mask[i & 3] for i, b in enumerate(buf[start:end]))
        frames.append((opcode, payload))
        pos = end
    return frames, buf[pos:]
