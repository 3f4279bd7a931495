"""The subscriber's side of a WebSocket: the websockets library for the handshake, then a bulk
reader of the server's frames.

The library's sans-I/O protocol checks the handshake (status, Upgrade, Sec-WebSocket-Accept).
For the frames that follow it costs about 5 µs each, a third of a delivery, so `FrameReader`
parses what one recv() brought in one pass: unmasked server frames, 7-, 16- and 64-bit lengths,
fragmented messages with control frames between the fragments, pings answered, and the close
handshake (RFC 6455 §5). The rare frames it sends (pong, close) are serialized by the library.
Text payloads are not decoded here: the subscriber's JSON parser rejects invalid UTF-8.
"""

from __future__ import annotations

from websockets.client import ClientProtocol
from websockets.exceptions import ProtocolError as LibraryProtocolError
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from pushserver_measure.http11 import HEAD_END, ConnectionClosed, Endpoint, HttpStatusError

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 16 << 20
"""Largest message accepted (a burn-in message is a few hundred bytes)."""


class ProtocolError(ConnectionClosed):
    """The server broke RFC 6455; the connection is dropped and resumed from the cursor."""


class FrameReader:
    """Server frames fed as they arrive → whole text messages, and the frames owed in reply."""

    __slots__ = ("_buf", "_parts", "_text", "closed", "replies")

    def __init__(self) -> None:
        self._buf = b""  # the start of a frame not yet complete
        self._parts: list[bytes] | None = None  # fragments of the message in progress
        self._text = False  # whether the message in progress is text (binary is dropped)
        self.replies: list[bytes] = []  # pongs and the close reply, masked, to send in order
        self.closed: str | None = None  # why the server closed; nothing is read after it

    def feed(self, data: bytes) -> list[bytes]:
        """The text messages completed by `data` (payload bytes), in order."""
        if self.closed is not None:
            return []
        buf = self._buf + data if self._buf else data
        pos, end = 0, len(buf)
        messages: list[bytes] = []
        while end - pos >= 2:
            first, second = buf[pos], buf[pos + 1]
            if second & 0x80:
                raise ProtocolError("a masked frame from the server")
            if first & 0x70:
                raise ProtocolError("reserved bits set without an extension")
            length, start = second & 0x7F, pos + 2
            if length >= 126:
                start += 2 if length == 126 else 8
                if start > end:
                    break
                length = int.from_bytes(buf[pos + 2 : start], "big")
                if length > MAX_MESSAGE:
                    raise ProtocolError(f"a frame of {length} bytes")
            stop = start + length
            if stop > end:
                break
            pos = stop
            opcode = first & 0x0F
            if opcode == TEXT and first & 0x80 and self._parts is None:
                messages.append(buf[start:stop])  # the common case: one whole text frame
            else:
                self._frame(opcode, bool(first & 0x80), buf[start:stop], messages)
                if self.closed is not None:
                    break
        self._buf = buf[pos:]
        return messages

    def _frame(self, opcode: int, fin: bool, payload: bytes, messages: list[bytes]) -> None:
        if opcode >= CLOSE:
            self._control(opcode, fin, payload)
            return
        if opcode == CONTINUATION:
            if self._parts is None:
                raise ProtocolError("a continuation frame outside a fragmented message")
            self._parts.append(payload)
            if sum(map(len, self._parts)) > MAX_MESSAGE:
                raise ProtocolError("a fragmented message over the size limit")
        elif opcode in (TEXT, BINARY):
            if self._parts is not None:
                raise ProtocolError("a new message before the last one's final fragment")
            self._parts, self._text = [payload], opcode == TEXT
        else:
            raise ProtocolError(f"reserved opcode {opcode:#x}")
        if fin:
            if self._text:
                messages.append(b"".join(self._parts))
            self._parts = None

    def _control(self, opcode: int, fin: bool, payload: bytes) -> None:
        """Control frames may come between fragments; they are never fragmented (§5.5)."""
        if not fin or len(payload) > 125:
            raise ProtocolError("a fragmented or oversized control frame")
        if opcode == PING:
            self.replies.append(Frame(Opcode.PONG, payload).serialize(mask=True))
        elif opcode == CLOSE:
            try:
                close = Close.parse(payload)
            except (LibraryProtocolError, UnicodeDecodeError) as exc:
                raise ProtocolError(f"a bad close frame: {exc}") from exc
            self.replies.append(
                Frame(Opcode.CLOSE, Close(close.code, "").serialize()).serialize(mask=True)
            )
            self.closed = f"websocket closed by the server: {close}"
        elif opcode != PONG:
            raise ProtocolError(f"reserved opcode {opcode:#x}")


class WebSocketClient:
    """One connection: feed it bytes, get text messages and the bytes to send."""

    __slots__ = ("_head", "frames", "protocol")

    def __init__(self, endpoint: Endpoint, path: str) -> None:
        self.protocol: ClientProtocol | None = ClientProtocol(
            parse_uri(f"ws://{endpoint.host_header}{path}")
        )
        self.protocol.send_request(self.protocol.connect())
        self._head: bytes | None = b""  # the handshake answer's head so far; None once given
        self.frames = FrameReader()

    def to_send(self) -> bytes:
        """The handshake request, then pongs and the close reply."""
        if self.protocol is not None:
            return b"".join(self.protocol.data_to_send())
        replies, self.frames.replies = self.frames.replies, []
        return b"".join(replies)

    def feed(self, data: bytes) -> list[bytes]:
        """The whole text messages `data` completed; raises if the handshake fails."""
        if self.protocol is not None:
            data = self._handshake(data)
        return self.frames.feed(data) if data else []

    @property
    def open(self) -> bool:
        """Whether the handshake has completed."""
        return self.protocol is None

    def check_open(self) -> None:
        """Raise once the server has closed (after the caller sent the close reply)."""
        if self.frames.closed is not None:
            raise ConnectionClosed(self.frames.closed)

    def _handshake(self, data: bytes) -> bytes:
        """Give the library the answer's head; return what follows it (the first frames)."""
        protocol = self.protocol
        assert protocol is not None
        rest = b""
        if self._head is None:  # a refusal's body, after its head
            protocol.receive_data(data)
        else:
            head = self._head + data
            end = head.find(HEAD_END)
            if end < 0:
                self._head = head
                return b""
            end += len(HEAD_END)
            protocol.receive_data(head[:end])
            self._head, rest = None, head[end:]
            if protocol.state is not State.OPEN:
                protocol.receive_data(rest)
                rest = b""
        for event in protocol.events_received():
            if isinstance(event, Response) and event.status_code != 101:
                retry = event.headers.get("Retry-After")
                delay = float(retry) if retry and retry.isdigit() else None
                raise HttpStatusError(event.status_code, bytes(event.body or b""), delay)
        if protocol.handshake_exc is not None:
            raise ConnectionClosed(f"websocket handshake failed: {protocol.handshake_exc}")
        if protocol.state is State.OPEN:
            self.protocol = None
        return rest
