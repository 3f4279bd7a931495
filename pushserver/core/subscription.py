"""The two kinds of subscriber the hub fans out to: held streams and long-poll waiters.

Both hold no reference back to the hub or their channels' tables, so a dropped connection leaves
no reference cycle behind for the cyclic GC to find.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, NamedTuple

from mypy_extensions import mypyc_attr

from ..wire.compression import Receiver
from ..wire.framing import Framing, longpoll_body
from .channel import Channel
from .messages import Event, Gap, frame_events
from .positions import Cursor


class Start(NamedTuple):
    """Where a new subscription starts: its channels, its cursor (its position in each), its
    client, and the events it gets first (its backlog)."""

    channels: tuple[LocalChannel, ...]
    at: Cursor
    remote: str
    events: Sequence[Event] = ()


NO_CURSOR: Final = Cursor()
"""The cursor a one-channel waiter keeps: its position is its channel's, so it keeps none (a held
long-poll's dict and cursor string were a tenth of its memory). Shared: never written to."""


class Bound(NamedTuple):
    """How much one long-poll answer may carry: events (gaps count) and envelope bytes."""

    events: int
    bytes: int


def bounded(
    framed: Iterable[tuple[bool, bytes, bytes]], bound: Bound
) -> tuple[list[bytes], bytes, bool]:
    """The envelopes of `framed` (is-gap, envelope, cursor after it) that one answer carries,
    the cursor after the last of them (empty if none) and whether any were left out.

    At least one event goes, however large, so every answer makes progress; a gap never ends
    an answer that could carry the event after it, so a client always gets what follows a loss
    together with the loss.
    """
    bodies: list[bytes] = []
    size = 0
    gap_last = False
    last = b""
    for is_gap, body, cursor in framed:
        if (
            bodies
            and not gap_last
            and (len(bodies) >= bound.events or size + len(body) > bound.bytes)
        ):
            return bodies, last, True
        bodies.append(body)
        size += len(body)
        gap_last = is_gap
        last = cursor
    return bodies, last, False


@mypyc_attr(allow_interpreted_subclasses=True)
class Subscription:
    """Channels and positions of one subscription.

    A one-channel subscription's position is always its channel's `sent_position`, so it keeps
    no per-message state; a multi-channel one keeps its cursor in `at`.
    """

    __slots__ = ("at", "channels", "remote", "single")

    def __init__(self, start: Start) -> None:
        self.channels, self.at, self.remote, _ = start
        self.single = self.channels[0] if len(self.channels) == 1 else None

    @property
    def cursor(self) -> str:
        if self.single is not None:
            return self.single.sent_position
        return str(self.at)

    def advance(self, event: Event) -> bytes:
        """Move past `event` and return the cursor after it (a held stream's backlog, and
        every event of a multi-channel subscription)."""
        return self.at.advance(event.channel, event.position)

    def framed(self, events: Iterable[Event]) -> Iterator[tuple[bytes, bytes]]:
        """Each event's envelope with this subscription's cursor after it, and that cursor."""
        single = self.single is not None
        for event in events:
            cursor = event.position.encode() if single else self.advance(event)
            yield event.body(cursor), cursor

    def frames(self, framing: Framing, events: Sequence[Event]) -> list[bytes]:
        """Events framed for this subscription alone (backlog and multi-channel fan-out),
        each with its cursor after it."""
        framed = list(self.framed(events))
        return frame_events(framing, events, [b for b, _ in framed], [c for _, c in framed])


@mypyc_attr(allow_interpreted_subclasses=True)
class StreamSubscriber(Subscription):
    """A held NDJSON, SSE or WebSocket connection, written to straight from the fan-out loop.

    Each transport says in `end` how the server closes it; `reason` records why it ended. A
    compressed one (its framing has a `coding`) has a `coder`: its place in its channel's chain
    of deflated frames, through which everything written to it goes.
    """

    __slots__ = ("coder", "framing", "reason", "transport")

    def __init__(
        self,
        start: Start,
        transport: asyncio.Transport,
        framing: Framing,
        coder: Receiver | None = None,
    ) -> None:
        super().__init__(start)
        self.transport = transport
        self.framing = framing
        self.coder = coder
        self.reason: str | None = None

    def wire(self, frames: list[bytes]) -> bytes:
        """Framed events (or comments) for this connection alone, as its socket takes them:
        chunked, and deflated here when it is compressed."""
        coder = self.coder
        if coder is None:
            return self.framing.chunk(b"".join(frames))
        return b"".join(map(coder.own, self.framing.units(frames)))

    def heartbeat(self) -> bytes:
        """A heartbeat's bytes; a compressed stream's keep its chain (`Receiver.beat`)."""
        coder = self.coder
        if coder is not None and coder.coding.heartbeat:
            return coder.beat()
        return self.framing.chunk(self.framing.comment(b""))

    def close(self, reason: str) -> None:
        """End the connection from the server side (once): cut off, expired or shutting down."""
        if self.reason is None:
            self.reason = reason
            self.end()

    def end(self) -> None:
        raise NotImplementedError


@mypyc_attr(allow_interpreted_subclasses=True)
class Waiter(Subscription):
    """A held long-poll. `resolve` answers it with a body (shared by all one-channel waiters
    whose `bound` holds the whole batch).

    A waiter that writes its own answer to its socket has a `wrap` that turns the body into the
    whole answer; the fan-out builds that once per body for every such waiter and hands it over
    through `send`. The core does not know what `wrap` adds (for HTTP: the status line and
    headers).
    """

    __slots__ = ("bound",)

    def wrapper(self) -> Callable[[bytes], bytes] | None:
        return None

    def __init__(self, start: Start, bound: Bound) -> None:
        super().__init__(start)
        self.bound = bound
        if self.single is not None:
            self.at = NO_CURSOR

    def resolve(self, body: bytes) -> None:
        raise NotImplementedError

    def send(self, answer: bytes) -> None:
        raise NotImplementedError

    def expire(self) -> None:
        """The hold time passed: answer with no messages and the unchanged cursor."""
        self.resolve(longpoll_body([], self.cursor))

    def answer(self, events: Sequence[Event]) -> tuple[bytes, int]:
        """The answer carrying as many of `events` as `bound` allows, and how many it carries.

        Its cursor is the one after its last event (for a multi-channel poll, each channel's
        part as of that event), so a client cut short resumes exactly there.
        """
        framed = self.framed(events)
        bodies, last, more = bounded(
            (
                (isinstance(e, Gap), body, cursor)
                for e, (body, cursor) in zip(events, framed, strict=True)
            ),
            self.bound,
        )
        cursor = last.decode() if bodies else self.cursor
        return longpoll_body(bodies, cursor, more), len(bodies)


LocalChannel = Channel[StreamSubscriber, Waiter]
"""A channel as this server holds it, with its held streams and long-polls."""
