"""Just enough of RFC 6455 for a receiving client: the handshake, frames in, pongs out."""

from __future__ import annotations

import base64
import os
import struct

from pushserver_measure.http11 import ConnectionClosed, Endpoint, Reader, request_bytes

OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


def handshake_bytes(endpoint: Endpoint, path: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    headers = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
    }
    return request_bytes("GET", endpoint.host_header, path, headers=headers)


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """Client frames must be masked; payloads here are pongs (at most 125 bytes)."""
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload[:125]))
    return bytes([0x80 | opcode, 0x80 | len(body)]) + mask + body


def read_message(reader: Reader) -> tuple[int, bytes]:
    """One whole message (continuations joined); control frames come back on their own."""
    parts: list[bytes] = []
    first_opcode = None
    while True:
        b0, b1 = reader.read_exact(2)
        opcode, fin, size = b0 & 0x0F, b0 & 0x80, b1 & 0x7F
        if size == 126:
            (size,) = struct.unpack("!H", reader.read_exact(2))
        elif size == 127:
            (size,) = struct.unpack("!Q", reader.read_exact(8))
        if b1 & 0x80:
            raise ConnectionClosed("masked frame from the server")
        payload = reader.read_exact(size)
        if opcode >= OP_CLOSE:
            return opcode, payload
        if first_opcode is None:
            first_opcode = opcode
        parts.append(payload)
        if fin:
            return first_opcode, b"".join(parts)
