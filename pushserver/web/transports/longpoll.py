"""`GET /lp/{channels}`: answer at once with what is buffered after the cursor, or hold the
request until a message comes or the timeout passes. `?callback=` wraps the answer as JSONP.

A held poll is a `Poll` owned by its connection's `FrontProtocol`: no task or handler waits for
it. A plain HTTP/1.1 keep-alive poll (no JSONP, no CORS) is a `PlainPoll`, whose whole answer
the fan-out builds once for all such waiters and writes to each socket itself. Once answered,
a kept-alive connection reads its next request on the same protocol."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...core.errors import InvalidInput
from ...core.subscription import Bound, Start, Waiter
from ...wire.framing import longpoll_body
from ..front.answer import JSON, NO_CACHE, json_answer
from ..front.head import RequestHead
from ..state import ServerState
from .common import begin, int_param, open_channels, subscribe_request

if TYPE_CHECKING:
    from ..front.protocol import FrontProtocol

CALLBACK_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]{0,63}")
SECONDS_RE = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?", re.ASCII)
JAVASCRIPT = ("Content-Type", "application/javascript")


def _timeout(query: Mapping[str, str], default: float, high: float) -> float:
    raw = query.get("timeout")
    if raw is None or raw == "":
        return default
    value = float(raw) if SECONDS_RE.fullmatch(raw) else -1.0
    if not 0 <= value <= high:
        raise InvalidInput("bad_timeout", f"?timeout must be seconds from 0 to {high:g}")
    return value


def _bound(query: Mapping[str, str], state: ServerState) -> Bound:
    """`?limit=N` events per answer (at least 1; above the server's cap it is the cap)."""
    cap = state.settings.longpoll_max_messages
    limit = int_param(query, "limit", cap, 1, 1 << 31)
    return Bound(min(limit, cap), state.settings.longpoll_max_bytes)


def _callback(query: Mapping[str, str]) -> str | None:
    callback = query.get("callback")
    if callback is None:
        return None
    if not CALLBACK_RE.fullmatch(callback):
        raise InvalidInput("bad_parameter", "?callback must be a JavaScript identifier")
    return callback


class Poll(Waiter):
    """A long-poll on a front-end connection; answered once (`answered`), by the fan-out, its
    hold time running out, a drain, or not at all when the client leaves first (`lost`)."""

    __slots__ = ("answered", "callback", "conn", "head")

    def __init__(
        self,
        start: Start,
        bound: Bound,
        conn: FrontProtocol,
        head: RequestHead | None,
        callback: str | None,
    ) -> None:
        super().__init__(start, bound)
        self.conn = conn
        self.head = head
        """What the answer depends on; None for a plain poll, whose answer depends on nothing
        (and which is kept alive), so a held poll does not keep its whole head."""
        self.callback = callback
        self.answered = False

    def content(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        """Headers and body of the answer carrying `body` (as JSONP with `?callback=`)."""
        if self.callback is None:
            return [NO_CACHE, JSON], body
        return [NO_CACHE, JAVASCRIPT], b"%b(%b);" % (self.callback.encode(), body)

    def hold(self, timeout: float) -> None:
        """Wait for a message, at most `timeout` seconds."""
        self.conn.front.state.hub.add_waiter(self)
        self.conn.hold(self, timeout)

    def resolve(self, body: bytes) -> None:
        if not self.answered:
            assert self.head is not None
            self.answered = True
            self.conn.write_answer(self.head, 200, *self.content(body))
            self._later()

    def _later(self) -> None:
        # After the fan-out loop: it is iterating the hub's waiters, and the last waiter's
        # answer should not wait for the others'.
        self.conn.front.loop.call_soon(self._done)

    def _done(self) -> None:
        self._let_go()
        self.conn.poll = None
        self.conn.finish(self.head is None or self.head.keep_alive)

    def _let_go(self) -> None:
        hub = self.conn.front.state.hub
        hub.remove_waiter(self)
        hub.leave("longpoll", self.remote)
        hub.release(self.channels)

    def lost(self) -> None:
        """The client left while the poll waited."""
        if not self.answered:
            self.answered = True
            self._let_go()


class PlainPoll(Poll):
    """A plain HTTP/1.1 keep-alive poll, answered with bytes the fan-out prebuilt."""

    __slots__ = ()
    wrap = staticmethod(json_answer)

    def resolve(self, body: bytes) -> None:
        self.send(json_answer(body))

    def send(self, answer: bytes) -> None:
        if not self.answered:
            self.answered = True
            transport = self.conn.transport
            if not transport.is_closing():
                transport.write(answer)
            self._later()


async def handle(conn: FrontProtocol, head: RequestHead) -> None:
    state = conn.front.state
    sub_req = subscribe_request(state, head, conn.remote(head), "longpoll")
    try:
        query = head.query
        timeout = _timeout(query, state.settings.default_timeout, state.settings.max_timeout)
        if sub_req.expires is not None:  # answered, with its cursor, when its token expires
            timeout = min(timeout, max(0.0, sub_req.expires - time.time()))
        callback = _callback(query)
        bound = _bound(query, state)
        start = await open_channels(sub_req)
        poll: Poll
        if callback is None and conn.plain(head):
            poll, events = begin(start, PlainPoll, bound, conn, None, None)
        else:
            poll, events = begin(start, Poll, bound, conn, head, callback)
        if events or timeout == 0 or conn.transport.is_closing():
            body = poll.answer(events)[0] if events else longpoll_body([], poll.cursor)
            conn.reply(head, 200, *poll.content(body))
        else:
            sub_req.hand_over()  # to the held poll, which gives slot and channels back when done
            poll.hold(timeout)
    finally:
        sub_req.release()
