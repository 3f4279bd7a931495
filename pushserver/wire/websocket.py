"""WebSocket framing (RFC 6455), sans-I/O: the server's frames and the reader of a client's.

The fan-out writes prebuilt server frames (`ws_frame`) straight to sockets. What a subscriber
sends is read by `ClientReader`, on the sans-I/O protocol of the `websockets` package: it checks
masking, opcodes, reserved bits, control frames, fragmentation, close codes and reasons, answers
pings and runs the close handshake. Two rules it leaves to its application are kept here: text
messages must be UTF-8 (§8.1, also across fragments) and a payload length must use the fewest
bytes (§5.2). For both, `ClientReader` walks the frame headers and hands the library one frame at
a time, so nothing after a broken frame is ever processed (§7.1.7).
"""

from __future__ import annotations

import codecs
import logging
import struct

from websockets.extensions import Extension
from websockets.frames import Frame, Opcode
from websockets.protocol import SEND_EOF, Protocol, Side, State

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
RSV1 = 0x40
"""The first reserved bit: set on a compressed message's first frame (RFC 7692 section 6)."""
MAX_FRAME = 64 << 10
"""Largest client frame accepted; a longer one is refused with 1009."""
PROTOCOL_ERROR, INVALID_DATA = 1002, 1007
LOG = logging.getLogger("pushserver.ws")
EXTENDED = {126: 2, 127: 8}
"""Bytes of extended payload length announced by the 7-bit length field."""
SMALLEST = {2: 126, 8: 1 << 16}
"""The smallest length each extended field may carry (§5.2: the minimal number of bytes)."""
utf8_decoder = codecs.getincrementaldecoder("utf-8")
DATA_OPCODES = frozenset((Opcode.TEXT, Opcode.BINARY, Opcode.CONT))


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, unfragmented server frame."""
    n = len(payload)
    first = 0x80 | opcode
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


def _open_protocol(extensions: list[Extension]) -> Protocol:
    protocol = Protocol(Side.SERVER, state=State.OPEN, max_size=(None, MAX_FRAME), logger=LOG)
    protocol.extensions = extensions
    return protocol


class ClientReader:
    """One client's frames, fed as they arrive; created on the first byte a subscriber sends
    (or when the server closes first), since most never send anything.

    `feed` and `close` return what to write, in order; an empty bytes object means "close the
    TCP connection now". Once `open` is false the connection is closing: nothing but the close
    goes out, and only the peer's close is read.

    `extensions` are what the handshake negotiated (permessage-deflate's inbound side): a
    compressed message (RSV1) is then inflated, and refused without it.
    """

    __slots__ = ("_extensions", "_head", "_left", "_protocol", "_text", "_unfinished", "done")

    def __init__(self, extensions: list[Extension] | None = None) -> None:
        self._extensions = extensions or []
        self._protocol = _open_protocol(self._extensions)
        self._unfinished = False
        """A data message has begun and not ended (its last frame had FIN clear)."""
        self._head = b""
        """The start of a frame header not yet complete."""
        self._left = 0
        """Bytes of the current frame not yet given to the library."""
        self._text: codecs.IncrementalDecoder | None = None
        """Checks the UTF-8 of the text message in progress."""
        self.done = False
        """The TCP connection is to be closed: nothing more is read."""

    @property
    def open(self) -> bool:
        return self._protocol.state is State.OPEN

    def feed(self, data: bytes) -> list[bytes]:
        """Read `data`; what the server must write in answer (pongs, a close, the end)."""
        out: list[bytes] = []
        pos, size = 0, len(data)
        while pos < size and not self.done:
            prefix = b""
            if not self._left:
                head = self._head + data[pos : pos + 14 - len(self._head)]
                need = 2 + EXTENDED.get(head[1] & 0x7F, 0) if len(head) >= 2 else 2
                if len(head) < need:
                    self._head = head
                    break
                prefix, self._head = self._head, b""
                length = head[1] & 0x7F
                if need > 2:
                    length = int.from_bytes(head[2:need], "big")
                    if length < SMALLEST[need - 2]:
                        self._fail(PROTOCOL_ERROR, "payload length not minimally encoded", out)
                        break
                    if length >> 63:
                        self._fail(PROTOCOL_ERROR, "payload length's top bit set (§5.2)", out)
                        break
                self._left = need + (4 if head[1] & 0x80 else 0) + length
                if head[0] & 0x0F == CLOSE and self._unfinished and self.open:
                    # §5.4 lets a close come between the fragments of a message, and §5.5.1
                    # wants it answered; the library would fail it as an unfinished message,
                    # so it reads the close as one that starts afresh.
                    self._protocol = _open_protocol(self._extensions)
            end = min(size, pos + self._left - len(prefix))
            piece = prefix + data[pos:end]
            self._left -= len(piece)
            pos = end
            self._step(piece, out)
        return out

    def close(self, code: int, reason: str) -> list[bytes]:
        """The server ends the connection: its close frame, if it has not sent one already."""
        protocol = self._protocol
        if protocol.state is not State.OPEN:
            return []
        protocol.send_close(code, reason)
        return protocol.data_to_send()

    def _step(self, piece: bytes, out: list[bytes]) -> None:
        """Give the library part of one frame; at the frame's end, note whether a message is
        left unfinished and check a text payload."""
        protocol = self._protocol
        was_open = protocol.state is State.OPEN
        protocol.receive_data(piece)
        if not self._left:
            for event in protocol.events_received():
                if not isinstance(event, Frame):
                    continue  # a server protocol past its handshake only yields frames
                if event.opcode in DATA_OPCODES:
                    self._unfinished = not event.fin
                if not self._utf8_ok(event.opcode, bytes(event.data), event.fin):
                    protocol.fail(INVALID_DATA, "invalid UTF-8 in a text message")
                    break
        self._collect(out, was_open)

    def _utf8_ok(self, opcode: Opcode, data: bytes, fin: bool) -> bool:
        """Whether a data frame keeps its text message valid UTF-8 so far."""
        if opcode is Opcode.TEXT:
            self._text = utf8_decoder()
        elif opcode is Opcode.BINARY:
            self._text = None
        if self._text is None or opcode not in (Opcode.TEXT, Opcode.CONT):
            return True
        try:
            self._text.decode(data, fin)
        except UnicodeDecodeError:
            return False
        if fin:
            self._text = None
        return True

    def _fail(self, code: int, reason: str, out: list[bytes]) -> None:
        was_open = self._protocol.state is State.OPEN
        self._protocol.fail(code, reason)
        self._collect(out, was_open)

    def _collect(self, out: list[bytes], was_open: bool) -> None:
        """Take the library's answers; once a close has been sent, only the end goes out (the
        library would still answer pings)."""
        for chunk in self._protocol.data_to_send():
            if chunk == SEND_EOF:
                self.done = True
            elif not was_open:
                continue
            out.append(chunk)
