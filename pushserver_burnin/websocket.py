"""The subscriber's side of a WebSocket, through the websockets library's sans-I/O client.

The library does the handshake, frame parsing, unmasking and pongs; this module only carries
bytes between it and a socket and turns its events into text messages.
"""

from __future__ import annotations

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from pushserver_measure.http11 import ConnectionClosed, Endpoint, HttpStatusError


class WebSocketClient:
    """One connection's protocol state: feed it bytes, get text messages and bytes to send."""

    def __init__(self, endpoint: Endpoint, path: str) -> None:
        self.protocol = ClientProtocol(parse_uri(f"ws://{endpoint.host_header}{path}"))
        self.protocol.send_request(self.protocol.connect())
        self._parts: list[bytes] = []

    def to_send(self) -> bytes:
        """The handshake request, pongs and close replies the protocol has queued."""
        return b"".join(self.protocol.data_to_send())

    def feed(self, data: bytes) -> list[bytes]:
        """The whole text messages `data` completed; raises once the connection is over."""
        self.protocol.receive_data(data)
        messages = []
        for event in self.protocol.events_received():
            if isinstance(event, Response) and event.status_code != 101:
                retry = event.headers.get("Retry-After")
                delay = float(retry) if retry and retry.isdigit() else None
                raise HttpStatusError(event.status_code, bytes(event.body or b""), delay)
            if isinstance(event, Frame) and event.opcode in (Opcode.TEXT, Opcode.CONT):
                self._parts.append(bytes(event.data))
                if event.fin:
                    messages.append(b"".join(self._parts))
                    self._parts = []
        if self.protocol.handshake_exc is not None:
            raise ConnectionClosed(f"websocket handshake failed: {self.protocol.handshake_exc}")
        if self.protocol.state is State.CLOSED and not messages:
            raise ConnectionClosed(f"websocket closed: {self.protocol.close_exc}")
        return messages
