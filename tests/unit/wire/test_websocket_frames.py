"""`pushserver.wire.websocket` on its own: bytes in, the bytes the server would write out."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from pushserver.wire.websocket import (
    BINARY,
    CLOSE,
    CONTINUATION,
    MAX_FRAME,
    PING,
    PONG,
    TEXT,
    ClientReader,
    ws_frame,
)

from ...wire import masked

EOF_MARK = (-1, b"")
"""How `frames` shows the reader's "close the TCP connection now"."""


def frames(out: list[bytes]) -> list[tuple[int, bytes]]:
    """The server frames in a reader's output, in order; EOF_MARK for the end of the stream."""
    found: list[tuple[int, bytes]] = []
    for chunk in out:
        if not chunk:
            found.append(EOF_MARK)
            continue
        pos = 0
        while pos < len(chunk):
            first, length = chunk[pos], chunk[pos + 1]
            assert not length & 0x80, "server frames are not masked"
            pos += 2
            found.append((first & 0x0F, chunk[pos : pos + length]))
            pos += length
    return found


def close(code: int, reason: bytes = b"") -> bytes:
    return struct.pack("!H", code) + reason


@pytest.mark.parametrize(
    ("size", "head"),
    [
        (0, b"\x81\x00"),
        (125, b"\x81\x7d"),
        (126, b"\x81\x7e\x00\x7e"),
        (65535, b"\x81\x7e\xff\xff"),
        (65536, b"\x81\x7f" + struct.pack("!Q", 65536)),
    ],
)
def test_server_frames_use_the_shortest_length(size, head):
    assert ws_frame(TEXT, b"x" * size) == head + b"x" * size


def test_pings_are_answered_however_the_bytes_are_split():
    data = masked(TEXT, b"x" * 300) + masked(PING, b"hi") + masked(BINARY, b"") + masked(PING, b"")
    for cut in range(len(data) + 1):
        reader = ClientReader()
        out = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert frames(out) == [(PONG, b"hi"), (PONG, b"")]
        assert reader.open and not reader.done


def test_a_64_kib_frame_trickled_one_byte_at_a_time_is_read():
    reader = ClientReader()
    data = masked(BINARY, b"\x00" * MAX_FRAME) + masked(PING, b"end")
    out = [chunk for i in range(len(data)) for chunk in reader.feed(data[i : i + 1])]
    assert frames(out) == [(PONG, b"end")]


def test_the_client_close_is_echoed_and_ends_the_connection():
    reader = ClientReader()
    out = reader.feed(masked(CLOSE, close(1000, b"bye")) + masked(PING, b"late"))
    assert frames(out) == [(CLOSE, close(1000, b"bye")), EOF_MARK]
    assert not reader.open and reader.done


@pytest.mark.parametrize(
    "begun",
    [
        masked(TEXT, b"abc", fin=False),
        masked(BINARY, b"\xff", fin=False),
        masked(TEXT, b"\xce", fin=False) + masked(CONTINUATION, b"\xba\xe1", fin=False),
    ],
)
@pytest.mark.parametrize("payload", [close(1000, b"bye"), close(1001), b""])
def test_a_close_between_fragments_is_echoed(begun, payload):
    """RFC 6455 §5.4: control frames may come in the middle of a fragmented message."""
    data = begun + masked(CLOSE, payload)
    for cut in range(len(data) + 1):
        reader = ClientReader()
        out = reader.feed(data[:cut]) + reader.feed(data[cut:] + masked(PING, b"late"))
        assert frames(out) == [(CLOSE, payload), EOF_MARK]
        assert reader.done


def test_after_the_server_closes_a_close_between_fragments_only_ends_the_connection():
    reader = ClientReader()
    reader.close(1012, "shutdown")
    data = masked(TEXT, b"abc", fin=False) + masked(CLOSE, close(1012))
    assert frames(reader.feed(data)) == [EOF_MARK]  # no second close frame


def test_a_message_still_follows_the_fragmentation_rules_after_it_ends():
    reader = ClientReader()
    data = masked(TEXT, b"a", fin=False) + masked(CONTINUATION, b"b") + masked(CONTINUATION, b"c")
    assert [op for op, _ in frames(reader.feed(data))] == [CLOSE, EOF_MARK[0]]


def test_after_the_server_closes_only_the_peer_close_is_read():
    reader = ClientReader()
    assert frames(reader.close(1012, "shutdown")) == [(CLOSE, close(1012, b"shutdown"))]
    assert not reader.open
    assert reader.close(1001, "again") == []
    assert reader.feed(masked(PING, b"ignored") + masked(TEXT, b"ignored")) == []
    assert frames(reader.feed(masked(CLOSE, close(1012)))) == [EOF_MARK]
    assert reader.done


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\x81\x02hi", 1002),  # unmasked
        (masked(0x3, b""), 1002),  # reserved opcode
        (masked(0xB, b""), 1002),
        (masked(TEXT, b"x", rsv=4), 1002),  # RSV1 without an extension
        (masked(PING, b"p" * 126), 1002),
        (masked(PING, b"p", fin=False), 1002),
        (masked(CONTINUATION, b"x"), 1002),
        (masked(TEXT, b"a", fin=False) + masked(TEXT, b"b"), 1002),
        (masked(TEXT, b"abc", width=2), 1002),  # length not minimal
        (masked(BINARY, b"x" * 200, width=8), 1002),
        (struct.pack("!BBQ", 0x82, 0xFF, MAX_FRAME + 1) + b"\x00" * 4, 1009),
        (struct.pack("!BBQ", 0x82, 0xFF, 1 << 63) + b"\x00" * 4, 1002),  # top bit set
        (masked(TEXT, b"\xff"), 1007),
        (masked(TEXT, b"\xce", fin=False) + masked(CONTINUATION, b"\x41"), 1007),
        (masked(TEXT, b"\xce"), 1007),  # a code point cut by the end of the message
        (masked(CLOSE, b"\x03"), 1002),
        (masked(CLOSE, close(1005)), 1002),
        (masked(CLOSE, close(999)), 1002),
        (masked(CLOSE, close(1000, b"\xff")), 1007),
    ],
)
def test_broken_input_fails_the_connection_and_nothing_after_it_is_read(data, code):
    reader = ClientReader()
    out = frames(reader.feed(data + masked(PING, b"after")))
    assert [(op, payload[:2]) for op, payload in out] == [(CLOSE, close(code)), EOF_MARK]
    assert out[0][1][2:].decode()  # the reason is valid UTF-8 text
    assert reader.done and reader.feed(masked(PING, b"later")) == []


def test_text_split_inside_a_code_point_and_around_a_ping_is_valid():
    reader = ClientReader()
    data = (
        masked(TEXT, b"\xce", fin=False)
        + masked(PING, b"mid")
        + masked(CONTINUATION, b"\xba\xe1\xbd", fin=False)
        + masked(CONTINUATION, b"\xb9")
    )
    assert frames(reader.feed(data)) == [(PONG, b"mid")]
    assert reader.open


def test_the_module_needs_no_event_loop_and_no_http_library():
    code = (
        "import sys, pushserver.wire.websocket; "
        "print(sorted(m for m in ('asyncio', 'aiohttp') if m in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
