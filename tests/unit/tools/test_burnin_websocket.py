"""The burn-in subscriber's WebSocket reader against what RFC 6455 lets a server send."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import Protocol, Side, State

from pushserver_burnin.websocket import FrameReader, ProtocolError, WebSocketClient
from pushserver_measure.http11 import ConnectionClosed, Endpoint, HttpStatusError

TEXT, BINARY, CONT, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode: int, payload: bytes, fin: bool = True, first_bits: int = 0) -> bytes:
    """A server frame (unmasked), with the shortest length encoding."""
    first = (0x80 if fin else 0) | first_bits | opcode
    n = len(payload)
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


def sent_frames(data: bytes) -> list[Frame]:
    """What a server reading the client's bytes sees (the library checks they are masked)."""
    server = Protocol(Side.SERVER, state=State.OPEN)
    server.receive_data(data)
    return [event for event in server.events_received() if isinstance(event, Frame)]


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 200_000])
def test_each_length_encoding(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert FrameReader().feed(frame(TEXT, payload)) == [payload]


def test_a_burst_in_one_feed_and_frames_cut_at_every_byte() -> None:
    payloads = [b'{"id":%d}' % i for i in range(5)] + [b"y" * 300, b"z" * 70_000]
    stream = b"".join(frame(TEXT, p) for p in payloads)
    assert FrameReader().feed(stream) == payloads
    for cut in range(1, 40):
        reader = FrameReader()
        assert reader.feed(stream[:cut]) + reader.feed(stream[cut:]) == payloads
    reader = FrameReader()
    assert [m for i in range(0, 400) for m in reader.feed(stream[i : i + 1])] == payloads[:6]


def test_fragments_with_control_frames_between_them() -> None:
    reader = FrameReader()
    stream = (
        frame(TEXT, b'{"a":', fin=False)
        + frame(PING, b"hb")
        + frame(CONT, b"1", fin=False)
        + frame(PONG, b"")
        + frame(CONT, b"}")
        + frame(TEXT, b"next")
    )
    assert reader.feed(stream) == [b'{"a":1}', b"next"]
    (pong,) = sent_frames(b"".join(reader.replies))
    assert pong.opcode is Opcode.PONG and pong.data == b"hb"


def test_binary_messages_are_skipped_whole() -> None:
    stream = frame(BINARY, b"\x00", fin=False) + frame(CONT, b"\x01") + frame(TEXT, b"t")
    assert FrameReader().feed(stream) == [b"t"]


def test_close_is_answered_and_ends_reading() -> None:
    reader = FrameReader()
    close = Close(1001, "going away").serialize()
    assert reader.feed(frame(TEXT, b"last") + frame(CLOSE, close) + frame(TEXT, b"x")) == [b"last"]
    assert reader.closed is not None and "1001" in reader.closed
    (reply,) = sent_frames(b"".join(reader.replies))
    assert reply.opcode is Opcode.CLOSE and Close.parse(reply.data).code == 1001
    assert reader.feed(frame(TEXT, b"after")) == []


@pytest.mark.parametrize(
    "stream",
    [
        b"\x81\x85abcd" + b"hello",  # masked
        frame(TEXT, b"x", first_bits=0x40),  # RSV1 without an extension
        frame(CONT, b"x"),  # continuation with nothing to continue
        frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"),  # a new message mid-message
        frame(PING, b"x", fin=False),  # a fragmented control frame
        frame(PING, b"x" * 126),  # an oversized control frame
        frame(0x3, b""),  # reserved data opcode
        frame(0xB, b""),  # reserved control opcode
        frame(CLOSE, b"\x03"),  # a close payload of one byte
        frame(CLOSE, struct.pack("!H", 1000) + b"\xff"),  # a close reason that is not UTF-8
        struct.pack("!BBQ", 0x81, 127, 1 << 40),  # far over the size limit
    ],
)
def test_protocol_errors_end_the_connection(stream: bytes) -> None:
    with pytest.raises(ProtocolError):
        FrameReader().feed(stream)


def _accept(request: bytes) -> bytes:
    key = next(
        line.split(b":", 1)[1].strip()
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def test_handshake_then_frames_in_the_same_read() -> None:
    client = WebSocketClient(Endpoint("127.0.0.1", 8080), "/ws/a?cursor=c")
    request = client.to_send()
    assert request.startswith(b"GET /ws/a?cursor=c HTTP/1.1\r\n")
    answer = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + _accept(request) + b"\r\n\r\n"
    )
    data = answer + frame(TEXT, b"one") + frame(PING, b"p") + frame(TEXT, b"tw")
    assert client.feed(data[:20]) == []
    assert client.feed(data[20:-1]) == [b"one"]
    assert client.feed(data[-1:]) == [b"tw"]
    (pong,) = sent_frames(client.to_send())
    assert pong.opcode is Opcode.PONG
    client.check_open()
    client.feed(frame(CLOSE, Close(1000, "").serialize()))
    with pytest.raises(ConnectionClosed):
        client.check_open()


def test_a_bad_accept_key_fails_the_handshake() -> None:
    client = WebSocketClient(Endpoint("127.0.0.1", 8080), "/ws/a")
    client.to_send()
    with pytest.raises(ConnectionClosed):
        client.feed(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n"
        )


def test_a_refusal_is_an_http_error_with_its_retry_after() -> None:
    client = WebSocketClient(Endpoint("127.0.0.1", 8080), "/ws/a")
    client.to_send()
    body = b'{"error":"draining"}'
    answer = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 3\r\nContent-Length: %d\r\n\r\n"
    data = answer % len(body) + body
    assert client.feed(data[:-5]) == []
    with pytest.raises(HttpStatusError) as refused:
        client.feed(data[-5:])
    assert refused.value.status == 503 and refused.value.retry_after == 3.0
    assert refused.value.body == body
