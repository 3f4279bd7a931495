"""The server side of the WebSocket opening handshake (RFC 6455 §4.2)."""

from __future__ import annotations

import base64
import binascii
import hashlib

from ...core.errors import InvalidInput
from ..http.request import RequestHead

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
VERSION = "13"


class HandshakeError(InvalidInput):
    """A request that is not a WebSocket opening handshake this server speaks; `headers` go
    with the 400 (the supported version, when that was the problem)."""

    def __init__(
        self, message: str, headers: dict[str, str] | None = None, code: str = "bad_request"
    ) -> None:
        super().__init__(code, message)
        self.headers = headers or {}


def accept(head: RequestHead) -> str:
    """The `Sec-WebSocket-Accept` value for a valid handshake; raises HandshakeError."""
    if head.version != "1.1":
        raise HandshakeError("a WebSocket handshake needs HTTP/1.1 (RFC 6455 section 4.1)")
    headers = head.headers
    if "websocket" not in _tokens(headers.get("upgrade", "")):
        raise HandshakeError("expected Upgrade: websocket")
    if "upgrade" not in _tokens(headers.get("connection", "")):
        raise HandshakeError("expected Connection: upgrade")
    if headers.get("sec-websocket-version", "").strip() != VERSION:
        raise HandshakeError(
            f"unsupported WebSocket version (this server speaks {VERSION})",
            {"Sec-WebSocket-Version": VERSION},
            "bad_websocket_version",
        )
    key = headers.get("sec-websocket-key", "").strip()
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except (binascii.Error, ValueError):
        raise HandshakeError("Sec-WebSocket-Key must be 16 bytes in base64") from None
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def _tokens(value: str) -> set[str]:
    """A comma-separated header's tokens, lower-cased: `Upgrade` and `Connection` are lists
    (RFC 9110 sections 7.6.1 and 7.8), so `Upgrade: websocket, h2c` asks for WebSocket too."""
    return {token.strip().lower() for token in value.split(",")}
