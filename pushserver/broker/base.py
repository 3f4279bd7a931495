"""What the server needs from a broker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..channel import Channel
from ..frames import Message
from ..names import Position


class Broker(Protocol):
    name: str

    @property
    def healthy(self) -> bool:
        """False while the broker cannot publish (Redis down); /healthz answers 503."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def publish(self, items: Sequence[tuple[str, bytes]]) -> list[tuple[Message, int]]:
        """Assign ids, store history and fan out; returns each message and its local audience."""

    async def channels(
        self, names: Sequence[str], positions: Mapping[str, Position] | None = None
    ) -> list[Channel]:
        """The local channels for a new subscription, ready to compute its backlog.

        `positions` is the subscriber's cursor: a Redis broker reads Redis again when the cursor
        is ahead of what this node has seen (it came from another node).

        Must not leave the event loop between returning and the caller attaching its
        subscriber, or a message could slip between backlog and live delivery.
        """

    def release(self, channels: Sequence[Channel]) -> None:
        """A subscription on these channels ended (the Redis broker may stop listening)."""

    async def info(self, name: str) -> Channel | None:
        """The channel's state for GET /channels, or None if it does not exist."""
