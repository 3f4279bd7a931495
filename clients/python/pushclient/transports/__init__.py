"""One module per subscribe transport, each parsing its wire format into events."""

from __future__ import annotations

from ..pollsize import PollLimit
from .base import Transport
from .longpoll import LongPollTransport
from .sse import SSETransport
from .stream import StreamTransport
from .ws import WebSocketTransport

TRANSPORT_NAMES = ("sse", "stream", "longpoll", "ws")


def make_transport(name: str, *, poll_timeout: float, limit: PollLimit) -> Transport:
    """The transport called `name` ("sse", "stream", "longpoll" or "ws"); a long-poll sizes its
    polls with `limit`."""
    if name == "longpoll":
        return LongPollTransport(poll_timeout, limit)
    kinds: dict[str, type[Transport]] = {
        "sse": SSETransport,
        "stream": StreamTransport,
        "ws": WebSocketTransport,
    }
    if name not in kinds:
        raise ValueError(f"unknown transport {name!r}: choose one of {', '.join(TRANSPORT_NAMES)}")
    return kinds[name]()


__all__ = ["TRANSPORT_NAMES", "Transport", "make_transport"]
