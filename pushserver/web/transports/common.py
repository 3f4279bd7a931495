"""What every subscribe transport does before it holds a connection: read and check the
request head, apply the limits, and find where the subscription starts; and, for held streams,
what they share once the front end has given their connection away."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, TypeVar

from mypy_extensions import mypyc_attr

from ...core.errors import InvalidInput, Unavailable, draining
from ...core.messages import Event, frame_events
from ...core.names import parse_channels
from ...core.positions import Cursor, Position
from ...core.subscription import LocalChannel, Start, StreamSubscriber, Subscription
from ...core.tokens import verify
from ...wire.compression import Receiver
from ...wire.framing import Framing
from ..http.request import RequestHead
from ..state import ServerState

S = TypeVar("S", bound=Subscription)

BACKLOG_SLICE: Final = 64 << 10
"""Bytes of backlog framed per write; slices go out while the transport takes them."""


@dataclasses.dataclass(slots=True)
class SubscribeRequest:
    state: ServerState
    kind: str
    channels: tuple[str, ...]
    positions: Mapping[str, Position]
    history: int
    remote: str
    expires: float | None
    """When the subscribe token expires (epoch seconds); None without --subscribe-secret."""
    reserved: bool = True
    """Whether this request still holds its connection slot (counted by `subscribe_request`)."""
    opened: tuple[LocalChannel, ...] | None = None
    """The channels `open_channels` opened, until a subscriber takes them over."""
    most: int | None = None
    """At most this many messages per channel are read for the backlog (`Hub.backlog`): a
    long-poll's answer carries no more; None for a stream, which gets all of it."""

    def hand_over(self) -> None:
        """The slot and the open channels now belong to a registered subscriber, which gives
        them back when it goes."""
        self.reserved = False
        self.opened = None

    def release(self) -> None:
        """Give back the slot and the open channels unless a subscriber took them; safe to call
        any number of times."""
        if self.reserved:
            self.reserved = False
            self.state.admission.leave(self.kind, self.remote)
        if self.opened is not None:
            opened, self.opened = self.opened, None
            self.state.hub.release(opened)


def int_param(
    query: Mapping[str, str], name: str, default: int, low: int, high: int, clamp: bool = False
) -> int:
    """`?name=` as an integer from `low` to `high` (above `high` it is `high` with `clamp`)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    # ASCII digits only: int() would also take " 5", "5_0" and other scripts' digits.
    value = digits_value(raw, high) if raw.isascii() and raw.isdigit() else low - 1
    if clamp and value > high:
        return high
    if not low <= value <= high:
        code = "bad_history" if name == "history" else "bad_parameter"
        raise InvalidInput(
            code, f"?{name} must be an integer from {low} to {high}, got {raw[:40]!r}"
        )
    return value


def digits_value(digits: str, high: int) -> int:
    """The value of ASCII digits, or `high + 1` when it is larger than `high`: however many there
    are (int() refuses a string of over 4,300 digits)."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(high)):
        return high + 1
    return int(significant or "0")


@dataclasses.dataclass(slots=True, frozen=True, eq=False)
class Subscribe:
    """What a subscribe head asks for, but its cursor and its client."""

    kind: str
    channels: tuple[str, ...]
    history: int
    expires: float | None
    """When the subscribe token expires (epoch seconds); None without --subscribe-secret."""

    def fresh(self) -> bool:
        """Whether the token (if any) is still good a second from now: a head parsed earlier
        may be used again without checking its token once more."""
        return self.expires is None or self.expires > time.time() + 1


def subscribe_request(
    state: ServerState, head: RequestHead, remote: str, kind: str, cursor: str | None = None
) -> SubscribeRequest:
    """Parse and check a subscribe request (`/{kind}/{channels}`) from `remote` and reserve its
    connection slot; raises PushError for anything a client must fix. The caller must
    `release()` it (and the channels it opens) in a `finally`."""
    if state.draining:
        raise draining()
    parsed = parse_subscribe(state, head, kind)
    return reserve(
        state, parsed, head.query.get("cursor", "") if cursor is None else cursor, remote
    )


NO_POSITIONS: Final[Mapping[str, Position]] = MappingProxyType({})
"""The positions of a subscription without a cursor."""


def _positions(cursor: str, channels: tuple[str, ...]) -> Mapping[str, Position]:
    """The cursor's positions for these channels, read only: none without a cursor, else
    shared by every request with the same cursor (the re-polls after one fan-out)."""
    return _read_cursor(cursor, channels) if cursor else NO_POSITIONS


@functools.lru_cache(maxsize=256)
def _read_cursor(cursor: str, channels: tuple[str, ...]) -> Mapping[str, Position]:
    return MappingProxyType(Cursor.read(cursor, channels))


def forget_cursors() -> None:
    """Empty the cursor cache (every sweep interval), so the channel names it is keyed by do
    not outlive their channels: each name pins the 1 MiB arena it was allocated in, and 256
    re-polls of 64 channels held 30 MB of arenas after a flood (docs/operations.md, "Memory
    handed back")."""
    _read_cursor.cache_clear()


def backlog_after(
    state: ServerState, channels: tuple[LocalChannel, ...], cursor: str, most: int
) -> list[Event] | None:
    """What a subscription on `channels` (all open, none with messages pending) has missed at
    `cursor`: a gap, then at most `most` messages per channel; None when the broker must catch
    up with `cursor` first (one another node gave, ahead of what this node has had: a new poll
    waits for it); raises InvalidInput for a bad cursor."""
    names = tuple(ch.name for ch in channels)
    positions, hub = _positions(cursor, names), state.hub
    if not all(hub.current(ch, positions) for ch in channels):
        return None
    return hub.backlog(channels, positions, 0, most)[0]


def parse_subscribe(state: ServerState, head: RequestHead, kind: str) -> Subscribe:
    """The subscription a head asks for (channels, history, token); raises PushError."""
    settings = state.settings
    channels = parse_channels(head.path.split("/", 2)[2], settings.max_channels_per_subscription)
    history = int_param(head.query, "history", 0, 0, settings.history_size)
    expires = None
    if settings.subscribe_secret:
        expires = verify(
            head.query.get("token"), settings.subscribe_secret, channels, settings.token_audience
        )
    return Subscribe(kind, channels, history, expires)


def reserve(
    state: ServerState, parsed: Subscribe, cursor: str, remote: str, most: int | None = None
) -> SubscribeRequest:
    """Check `cursor` and the connection limits and reserve the connection slot (`most`:
    `SubscribeRequest.most`)."""
    if state.draining:
        raise draining()
    positions = _positions(cursor, parsed.channels)
    kind, channels = parsed.kind, parsed.channels
    admit(state, kind, remote)
    return SubscribeRequest(
        state, kind, channels, positions, parsed.history, remote, parsed.expires, most=most
    )


def admit(state: ServerState, kind: str, remote: str) -> None:
    """Count a held connection of `kind` from `remote` (`Admission.leave` gives it back);
    raises PushError when the server drains or is full."""
    if state.draining:
        raise draining()
    state.admission.admit(kind, remote)  # reserved before any await, so concurrent requests see it


def open_now(sub_req: SubscribeRequest) -> Start | None:
    """Where the subscription starts: its channels from the broker, its position in each, and
    its backlog (in `Start.events`), the cursor checked against them; None when the broker must
    be waited for (then `open_channels`).

    Runs before any byte of the response is sent, so a refusal here (bad cursor, broker down)
    is still a clean JSON error. The caller passes the start to `begin` without an await in
    between, so the backlog is still exact then and is computed once per request.
    """
    state = sub_req.state
    hub = state.hub
    held = hub.broker.history
    if not all(map(held.__contains__, sub_req.channels)):  # a re-poll's are all held
        check_room(state, sub_req.channels)
    channels = hub.open_now(sub_req.channels, sub_req.positions)
    return None if channels is None else _start(sub_req, channels)


def check_room(state: ServerState, names: tuple[str, ...]) -> None:
    """Refuse a subscription whose channels not yet held would pass `--max-channels`."""
    hub = state.hub
    held = hub.broker.history
    new = sum(name not in held for name in names)
    limit = state.settings.max_channels
    if len(held) + new > limit:
        hub.stats.limits_hit["max_channels"] += 1
        raise Unavailable("over_capacity", f"server holds its maximum of {limit} channels")


async def open_channels(sub_req: SubscribeRequest) -> Start:
    """`open_now`, waiting for the broker when it must."""
    start = open_now(sub_req)
    if start is not None:
        return start
    state = sub_req.state
    start = _start(sub_req, await state.hub.open(sub_req.channels, sub_req.positions))
    if state.draining:  # the drain has answered what was held: this would wait for nothing
        raise draining()
    return start


def _start(sub_req: SubscribeRequest, channels: tuple[LocalChannel, ...]) -> Start:
    sub_req.opened = channels
    events, parts = sub_req.state.hub.backlog(
        channels, sub_req.positions, sub_req.history, sub_req.most
    )
    return Start(channels, parts, sub_req.remote, events)


def begin(start: Start, factory: type[S], *args: object) -> tuple[S, list[Event]]:
    """Build the subscriber, and hand back its backlog.

    Synchronous, and the caller registers the subscriber with the hub before it next awaits, so
    no message can slip between the backlog and live delivery or arrive twice.
    """
    return factory(start, *args), list(start.events)


@mypyc_attr(allow_interpreted_subclasses=True)
class HeldSubscriber(StreamSubscriber, asyncio.Protocol):
    """A held stream (NDJSON, SSE, WebSocket) once its head is sent: the transport's protocol and
    the hub's subscriber in one object. Losing the connection unregisters it.

    Its backlog goes out in slices, each written only while the transport's buffer is under its
    high-water mark, the next when the client has read enough (`resume_writing`): a huge
    backlog never sits whole in memory for a client that does not read. Until the backlog is
    written the subscriber is not in the fan-out; then, with no `await` in between, it takes
    what was fanned out meanwhile from history (or a gap, if that is gone) and joins it.
    """

    __slots__ = ("backlog", "state")

    def __init__(
        self,
        start: Start,
        transport: asyncio.Transport,
        framing: Framing,
        state: ServerState,
        coder: Receiver | None = None,
    ) -> None:
        super().__init__(start, transport, framing, coder)
        self.state = state
        self.backlog: deque[Event] | None = None
        """Events still to write before joining the fan-out; None once joined."""

    def catch_up(self, events: list[Event]) -> None:
        """Start writing `events`; joins the fan-out once they and what followed are out."""
        self.backlog = deque(events)
        self._write_backlog()

    def resume_writing(self) -> None:
        if self.backlog is not None:
            self._write_backlog()

    def _write_backlog(self) -> None:
        transport = self.transport
        _, high = transport.get_write_buffer_limits()
        backlog = self.backlog
        while backlog is not None and not transport.is_closing():
            if transport.get_write_buffer_size() > high:
                return  # paused: resume_writing brings us back once the client has read
            if not backlog:
                hub = self.state.hub
                backlog.extend(hub.backlog(self.channels, self.at.positions(), 0)[0])
                if not backlog:
                    self.backlog = None
                    hub.attach(self)
                    return
            transport.write(self._slice(backlog))

    def _slice(self, backlog: deque[Event]) -> bytes:
        """Up to `BACKLOG_SLICE` bytes of events as the socket takes them, each with the
        cursor after it."""
        events: list[Event] = []
        bodies: list[bytes] = []
        cursors: list[bytes] = []
        size = 0
        while backlog and size < BACKLOG_SLICE:
            event = backlog.popleft()
            cursor = self.advance(event)
            events.append(event)
            bodies.append(event.body(cursor))
            cursors.append(cursor)
            size += len(bodies[-1])
        return self.wire(frame_events(self.framing, events, bodies, cursors))

    def connection_lost(self, exc: Exception | None) -> None:
        self.backlog = None
        state = self.state
        hub = state.hub
        state.expiry.discard(self)
        hub.stats.disconnects[self.reason or "client"] += 1
        state.admission.leave(self.framing.name, self.remote)
        hub.detach(self)
        hub.release(self.channels)


def take_over(
    transport: asyncio.Transport,
    sub_req: SubscribeRequest,
    sub: HeldSubscriber,
    events: list[Event],
) -> None:
    """Make `sub` the connection's protocol, register it with the connection counts and the
    token-expiry watch and start its backlog (it joins the fan-out once that is written).

    Does not leave the event loop, so it keeps `begin`'s promise: a message fanned out before
    the subscriber joins is in history, and reaches it from there.
    """
    transport.set_protocol(sub)
    state = sub_req.state
    sub_req.hand_over()
    state.expiry.add(sub, sub_req.expires)
    sub.catch_up(events)
