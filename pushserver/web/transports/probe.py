"""`HEAD` on a subscribe path (RFC 9110 section 9.3.2): every check its `GET` makes, in the
same order, so it is refused with the same status and headers; else answered at once with the
head that `GET` would begin with. Nothing is held: the connection slot is taken and given back
in the same call, no channel is opened and the broker is not waited for. Each transport's
checks are its record's `probe` (`exchange.Transport`), built from the steps here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...core.errors import draining
from ...core.positions import Position
from ..http.request import RequestHead
from ..state import ServerState
from .common import Subscribe, check_room, reserve
from .exchange import Check

if TYPE_CHECKING:
    from .exchange import Exchange


def handle(conn: Exchange, head: RequestHead, check: Check) -> None:
    """Answer `HEAD /{segment}/{channels}`; raises the PushError its GET would be refused with."""
    if conn.state.draining:
        raise draining()
    conn.reply(head, 200, check(conn, head), None)


def check_subscription(conn: Exchange, head: RequestHead, parsed: Subscribe, cursor: str) -> None:
    """What a subscribe GET checks from its reservation to its first byte."""
    check_open(conn.state, parsed, check_reserve(conn, head, parsed, cursor))


def check_reserve(
    conn: Exchange, head: RequestHead, parsed: Subscribe, cursor: str
) -> Mapping[str, Position]:
    """`reserve`'s checks (the cursor's form, draining, the connection limits), its slot given
    back at once; the cursor's positions."""
    sub_req = reserve(conn.state, parsed, cursor, conn.remote(head))
    sub_req.release()
    return sub_req.positions


def check_open(state: ServerState, parsed: Subscribe, positions: Mapping[str, Position]) -> None:
    """`open_now`'s checks on what is at hand: room for the channels not held, and the cursor
    against the channels held (for the others only the broker knows, and it is not asked)."""
    channels = state.hub.channels
    if not all(map(state.hub.broker.history.__contains__, parsed.channels)):
        check_room(state, parsed.channels)
    for name, position in positions.items():
        ch = channels.get(name)
        if ch is not None:
            ch.backlog(position, 0, 0)  # raises bad_cursor for an id past the channel's last
