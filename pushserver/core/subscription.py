"""The two kinds of subscriber the hub fans out to: held streams and long-poll waiters.

Both hold no reference back to the hub or their channels' sets, so a dropped connection leaves
no reference cycle behind for the cyclic GC to find.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from ..wire.framing import Framing, longpoll_body
from .channel import Channel
from .messages import Event


class Start(NamedTuple):
    """Where a new subscription starts: its channels, its position in each, and its client."""

    channels: list[LocalChannel]
    parts: dict[str, str]
    remote: str


class Subscription:
    """Channels and positions of one subscription.

    A one-channel subscription's position is always its channel's `sent_position`, so it keeps
    no per-message state; a multi-channel one keeps a position per channel in `parts`.
    """

    __slots__ = ("channels", "parts", "remote", "single")

    def __init__(self, start: Start) -> None:
        self.channels, self.parts, self.remote = start
        self.single = self.channels[0] if len(self.channels) == 1 else None

    @property
    def cursor(self) -> str:
        if self.single is not None:
            return self.single.sent_position
        return ",".join(self.parts.values())

    def advance(self, event: Event) -> bytes:
        """Move past `event` and return the cursor after it, for a multi-channel subscription."""
        parts = self.parts
        parts[event.channel] = event.position
        return ",".join(parts.values()).encode()

    def framed(self, events: Iterable[Event]) -> Iterator[tuple[bytes, bytes]]:
        """Each event's envelope with this subscription's cursor after it, and that cursor."""
        single = self.single is not None
        for event in events:
            cursor = event.position.encode() if single else self.advance(event)
            yield event.body(cursor), cursor

    def encode(self, framing: Framing, events: Iterable[Event]) -> bytes:
        """Events framed for a held connection (backlog and multi-channel fan-out)."""
        return b"".join(framing.event(body, cursor) for body, cursor in self.framed(events))

    def bodies(self, events: Iterable[Event]) -> list[bytes]:
        """Envelopes for a long-poll answer."""
        return [body for body, _ in self.framed(events)]


class StreamSubscriber(Subscription):
    """A held NDJSON, SSE or WebSocket connection, written to straight from the fan-out loop.

    Each transport says in `end` how the server closes it; `reason` records why it ended.
    """

    __slots__ = ("framing", "reason", "transport")

    def __init__(self, start: Start, transport: asyncio.Transport, framing: Framing) -> None:
        super().__init__(start)
        self.transport = transport
        self.framing = framing
        self.reason: str | None = None

    def close(self, reason: str) -> None:
        """End the connection from the server side (once): cut off, expired or shutting down."""
        if self.reason is None:
            self.reason = reason
            self.end()

    def end(self) -> None:
        raise NotImplementedError


class Waiter(Subscription):
    """A held long-poll. `resolve` answers it with a body (shared by all one-channel waiters).

    A waiter that writes its own answer to its socket has a `wrap` that turns the body into the
    whole answer; the fan-out builds that once for every such waiter and hands it over through
    `send`. The core does not know what `wrap` adds (for HTTP: the status line and headers).
    """

    __slots__ = ()
    wrap: Callable[[bytes], bytes] | None = None

    def resolve(self, body: bytes) -> None:
        raise NotImplementedError

    def send(self, answer: bytes) -> None:
        raise NotImplementedError

    def expire(self) -> None:
        """The hold time passed: answer with no messages and the unchanged cursor."""
        self.resolve(longpoll_body([], self.cursor))

    def answer(self, events: Iterable[Event]) -> bytes:
        bodies = self.bodies(events)
        return longpoll_body(bodies, self.cursor)


class AwaitedPoll(Waiter):
    """A long-poll whose handler waits for the body and answers through aiohttp (JSONP,
    HTTP/1.0, CORS: anything the prebuilt answer would get wrong)."""

    __slots__ = ("future",)

    def __init__(self, start: Start) -> None:
        super().__init__(start)
        self.future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def resolve(self, body: bytes) -> None:
        if not self.future.done():
            self.future.set_result(body)


LocalChannel = Channel[StreamSubscriber, Waiter]
"""A channel as this server holds it, with its held streams and long-polls."""
