"""The reader of client WebSocket frames, on byte strings built by hand."""

from __future__ import annotations

import struct

import pytest

from pushserver.wire.websocket import (
    BINARY,
    CLOSE,
    MAX_FRAME,
    PING,
    TEXT,
    FrameError,
    client_frames,
)

from .wire import masked


def test_frames_are_read_whole_and_the_rest_kept():
    data = masked(TEXT, b"x" * 300) + masked(PING, b"hi") + masked(CLOSE, b"\x03\xe8")
    for cut in range(len(data) + 1):
        first, rest = client_frames(data[:cut])
        frames, left = client_frames(rest + data[cut:])
        assert first + frames == [(TEXT, b""), (PING, b"hi"), (CLOSE, b"\x03\xe8")]
        assert left == b""


def test_a_16_bit_length_is_read():
    frames, rest = client_frames(masked(BINARY, b"a" * 10, extended=True) + b"\x89")
    assert frames == [(BINARY, b"")] and rest == b"\x89"


@pytest.mark.parametrize(
    ("raw", "code", "words"),
    [
        (b"\x81\x02hi", 1002, "masked"),
        (masked(0x3, b""), 1002, "unknown opcode"),
        (b"\xc1" + masked(TEXT, b"x")[1:], 1002, "extension"),
        (masked(PING, b"p" * 126), 1002, "125 bytes"),
        (masked(PING, b"p", fin=False), 1002, "whole"),
        (struct.pack("!BBQ", 0x82, 0xFF, MAX_FRAME + 1), 1009, "larger than"),
    ],
)
def test_broken_frames_are_refused_with_a_close_code(raw, code, words):
    with pytest.raises(FrameError, match=words) as info:
        client_frames(raw)
    assert info.value.code == code
