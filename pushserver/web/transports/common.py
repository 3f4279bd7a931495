"""What every subscribe transport does before it holds a connection: read and check the
request head, apply the limits, and find where the subscription starts; and, for held streams,
what they share once the front end has given their connection away."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Mapping
from typing import TypeVar

from ...core.errors import InvalidInput, TooMany, Unavailable, draining
from ...core.messages import Event
from ...core.names import parse_channels
from ...core.positions import Position, parse_cursor, restrict
from ...core.subscription import LocalChannel, Start, StreamSubscriber, Subscription
from ...core.tokens import verify
from ...wire.framing import Framing
from ..front.head import RequestHead
from ..state import ServerState

S = TypeVar("S", bound=Subscription)

BACKLOG_SLICE = 64 << 10
"""Bytes of backlog framed per write; slices go out while the transport takes them."""


@dataclasses.dataclass(slots=True)
class SubscribeRequest:
    state: ServerState
    kind: str
    channels: tuple[str, ...]
    positions: dict[str, Position]
    history: int
    remote: str
    expires: float | None
    """When the subscribe token expires (epoch seconds); None without --subscribe-secret."""
    reserved: bool = True
    """Whether this request still holds its connection slot (counted by `subscribe_request`)."""
    opened: list[LocalChannel] | None = None
    """The channels `open_channels` opened, until a subscriber takes them over."""

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
            self.state.hub.leave(self.kind, self.remote)
        if self.opened is not None:
            opened, self.opened = self.opened, None
            self.state.hub.release(opened)


def int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    # ASCII digits only: int() would also take " 5", "5_0" and other scripts' digits.
    value = int(raw) if raw.isascii() and raw.isdigit() else low - 1
    if not low <= value <= high:
        code = "bad_history" if name == "history" else "bad_parameter"
        raise InvalidInput(
            code, f"?{name} must be an integer from {low} to {high}, got {raw[:40]!r}"
        )
    return value


def subscribe_request(
    state: ServerState, head: RequestHead, remote: str, kind: str, cursor: str | None = None
) -> SubscribeRequest:
    """Parse and check a subscribe request (`/{kind}/{channels}`) from `remote` and reserve its
    connection slot; raises PushError for anything a client must fix. The caller must
    `release()` it (and the channels it opens) in a `finally`."""
    settings = state.settings
    if state.draining:
        raise draining()
    channels = parse_channels(head.path.rpartition("/")[2], settings.max_channels_per_subscription)
    query = head.query
    if cursor is None:
        cursor = query.get("cursor", "")
    positions = restrict(parse_cursor(cursor), channels)
    history = int_param(query, "history", 0, 0, settings.history_size)
    expires = None
    if settings.subscribe_secret:
        expires = verify(
            query.get("token"), settings.subscribe_secret, channels, settings.token_audience
        )
    hub = state.hub
    # Connections still sending their heads are bounded on their own when accepted
    # (`heads.HeadGuard`); counting them here would refuse a subscriber for a mere admin request
    # arriving at the same moment.
    if hub.connection_total >= settings.max_connections:
        hub.stats.limits_hit["max_connections"] += 1
        raise Unavailable(
            "over_capacity", f"server holds its maximum of {settings.max_connections} connections"
        )
    per_ip = settings.max_connections_per_ip
    if per_ip and hub.per_ip[remote] - state.heads.per_ip[remote] >= per_ip:
        hub.stats.limits_hit["max_connections_per_ip"] += 1
        raise TooMany(
            "too_many_connections", f"at most {per_ip} held connections per client address"
        )
    hub.enter(kind, remote)  # reserved before any await, so concurrent requests see it
    return SubscribeRequest(state, kind, channels, positions, history, remote, expires)


async def open_channels(sub_req: SubscribeRequest) -> Start:
    """Where the subscription starts: its channels from the broker, its position in each, and
    its backlog (in `Start.events`), the cursor checked against them.

    Runs before any byte of the response is sent, so a refusal here (bad cursor, broker down)
    is still a clean JSON error. The caller passes the start to `begin` without an await in
    between, so the backlog is still exact then and is computed once per request.
    """
    state = sub_req.state
    hub = state.hub
    new = sum(name not in hub.channels for name in sub_req.channels)
    limit = state.settings.max_channels
    if new and len(hub.channels) + new > limit:
        hub.stats.limits_hit["max_channels"] += 1
        raise Unavailable("over_capacity", f"server holds its maximum of {limit} channels")
    channels = sub_req.opened = await hub.open(sub_req.channels, sub_req.positions)
    events, parts = hub.backlog(channels, sub_req.positions, sub_req.history)
    return Start(channels, parts, sub_req.remote, events)


def begin(start: Start, factory: type[S], *args: object) -> tuple[S, list[Event]]:
    """Build the subscriber, and hand back its backlog.

    Synchronous, and the caller registers the subscriber with the hub before it next awaits, so
    no message can slip between the backlog and live delivery or arrive twice.
    """
    return factory(start, *args), list(start.events)


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
        self, start: Start, transport: asyncio.Transport, framing: Framing, state: ServerState
    ) -> None:
        super().__init__(start, transport, framing)
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
                position = parse_cursor(",".join(self.parts.values()))
                backlog.extend(hub.backlog(self.channels, position, 0)[0])
                if not backlog:
                    self.backlog = None
                    hub.attach(self)
                    return
            transport.write(self.framing.chunk(self._slice(backlog)))

    def _slice(self, backlog: deque[Event]) -> bytes:
        """Up to `BACKLOG_SLICE` bytes of framed events, each with the cursor after it."""
        frames: list[bytes] = []
        size = 0
        while backlog and size < BACKLOG_SLICE:
            event = backlog.popleft()
            cursor = self.advance(event)
            frames.append(self.framing.event(event.body(cursor), cursor))
            size += len(frames[-1])
        return b"".join(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        self.backlog = None
        state = self.state
        hub = state.hub
        state.expiry.discard(self)
        hub.stats.disconnects[self.reason or "client"] += 1
        hub.leave(self.framing.name, self.remote)
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
