"""`HEAD` on a subscribe path (RFC 9110 section 9.3.2): every check its `GET` makes, in the
same order, so it is refused with the same status and headers; else answered at once with the
head that `GET` would begin with. Nothing is held: the connection slot is taken and given back
in the same call, no channel is opened and the broker is not waited for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...core.errors import draining
from ...core.positions import Position
from ..front.answer import JSON, NO_CACHE
from ..front.handshake import HandshakeError, accept
from ..front.head import RequestHead
from ..state import ServerState
from . import sse
from .common import Subscribe, check_room, int_param, parse_subscribe, reserve
from .held import HEADERS
from .longpoll import JAVASCRIPT, PollRequest

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol

Headers = list[tuple[str, str]]


def handle(conn: FrontProtocol, head: RequestHead) -> None:
    """Answer `HEAD /{kind}/{channels}`; raises the PushError its GET would be refused with."""
    if conn.front.state.draining:
        raise draining()
    path = head.path
    check = CHECKS[path[1 : path.index("/", 1)]]
    conn.reply_head(head, 200, check(conn, head))


def _longpoll(conn: FrontProtocol, head: RequestHead) -> Headers:
    poll = PollRequest.parse(conn, head)
    _check_subscription(conn, head, poll.subscribe, head.query.get("cursor", ""))
    return [NO_CACHE, JSON if poll.callback is None else JAVASCRIPT]


def _held(kind: str, content_type: str) -> Callable[[FrontProtocol, RequestHead], Headers]:
    """The checks of a held stream's GET (`held.serve_held`)."""

    def check(conn: FrontProtocol, head: RequestHead) -> Headers:
        state = conn.front.state
        parsed = parse_subscribe(state, head, kind)
        cursor = sse.cursor_of(head) if kind == "sse" else head.query.get("cursor", "")
        positions = _reserve(conn, head, parsed, cursor)
        int_param(head.query, "pad", 0, 0, state.settings.max_pad)
        _open(state, parsed, positions)
        return [*HEADERS, ("Content-Type", content_type)]

    return check


def _websocket(conn: FrontProtocol, head: RequestHead) -> Headers:
    """A HEAD is no opening handshake: refused as a GET without the upgrade headers is."""
    parsed = parse_subscribe(conn.front.state, head, "ws")
    _check_subscription(conn, head, parsed, head.query.get("cursor", ""))
    accept(head)
    raise HandshakeError("a WebSocket handshake is a GET request (RFC 6455 section 4.1)")


def _check_subscription(
    conn: FrontProtocol, head: RequestHead, parsed: Subscribe, cursor: str
) -> None:
    """What a subscribe GET checks from its reservation to its first byte."""
    _open(conn.front.state, parsed, _reserve(conn, head, parsed, cursor))


def _reserve(
    conn: FrontProtocol, head: RequestHead, parsed: Subscribe, cursor: str
) -> Mapping[str, Position]:
    """`reserve`'s checks (the cursor's form, draining, the connection limits), its slot given
    back at once; the cursor's positions."""
    sub_req = reserve(conn.front.state, parsed, cursor, conn.remote(head))
    sub_req.release()
    return sub_req.positions


def _open(state: ServerState, parsed: Subscribe, positions: Mapping[str, Position]) -> None:
    """`open_now`'s checks on what is at hand: room for the channels not held, and the cursor
    against the channels held (for the others only the broker knows, and it is not asked)."""
    channels = state.hub.channels
    if not all(map(state.hub.broker.history.__contains__, parsed.channels)):
        check_room(state, parsed.channels)
    for name, position in positions.items():
        ch = channels.get(name)
        if ch is not None:
            ch.backlog(position, 0)  # raises bad_cursor for an id past the channel's last


CHECKS: dict[str, Callable[[FrontProtocol, RequestHead], Headers]] = {
    "lp": _longpoll,
    "stream": _held("stream", "application/x-ndjson"),
    "sse": _held("sse", "text/event-stream"),
    "ws": _websocket,
}
"""The checks of each subscribe path's GET, by the path's first segment, and the headers of
the head it begins its answer with."""
