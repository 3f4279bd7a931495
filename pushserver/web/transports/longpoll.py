"""`GET /lp/{channels}`: answer at once with what is buffered after the cursor, or hold the
request until a message comes or the timeout passes. `?callback=` wraps the answer as JSONP.

A held poll is a `Poll` owned by its connection's `FrontProtocol`: no task or handler waits for
it. A plain HTTP/1.1 keep-alive poll (no JSONP, no CORS) is a `PlainPoll`, whose whole answer
the fan-out builds once for all such waiters and writes to each socket itself. Once answered,
a kept-alive connection reads its next request on the same protocol."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING

from ...core.errors import InvalidInput, draining
from ...core.subscription import Bound, Start, Waiter
from ...wire.framing import longpoll_body
from ..front.answer import JSON, NO_CACHE, json_answer
from ..front.head import RequestHead
from ..state import ServerState
from .common import (
    Subscribe,
    SubscribeRequest,
    begin,
    int_param,
    open_channels,
    open_now,
    parse_subscribe,
    reserve,
)

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
        self.conn.front.after(self)

    def done(self) -> None:
        """From the front end, after the answer: the connection goes on to its next request."""
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


def handle(conn: FrontProtocol, head: RequestHead) -> Awaitable[None] | None:
    """Answer or hold the poll at once when the broker has its channels at hand (no task);
    else return what finishes it once the broker has been waited for."""
    state = conn.front.state
    if state.draining:
        raise draining()
    poll = PollRequest.parse(conn, head)
    conn.remember(head, "cursor", poll)
    return poll.serve(conn, head.query.get("cursor", ""))


@dataclasses.dataclass(slots=True, frozen=True, eq=False)
class PollRequest:
    """A poll's head, parsed, but for its cursor: the same for every re-poll of a client, so
    the front end serves those from it (`again`)."""

    head: RequestHead
    subscribe: Subscribe
    timeout: float
    callback: str | None
    bound: Bound
    plain: bool
    """Whether its answer is a `PlainPoll`'s (`FrontProtocol.plain`, no JSONP)."""

    @classmethod
    def parse(cls, conn: FrontProtocol, head: RequestHead) -> PollRequest:
        state = conn.front.state
        query = head.query
        settings = state.settings
        subscribe = parse_subscribe(state, head, "longpoll")
        timeout = _timeout(query, settings.default_timeout, settings.max_timeout)
        callback = _callback(query)
        bound = _bound(query, state)
        plain = callback is None and conn.plain(head)
        return cls(head, subscribe, timeout, callback, bound, plain)

    def again(self, conn: FrontProtocol, cursor: str) -> Awaitable[None] | None:
        """Serve this head again with `cursor` (its token checked again when near expiry)."""
        if self.subscribe.fresh():
            return self.serve(conn, cursor)
        return PollRequest.parse(conn, self.head).serve(conn, cursor)

    def serve(self, conn: FrontProtocol, cursor: str) -> Awaitable[None] | None:
        state = conn.front.state
        sub_req = reserve(state, self.subscribe, cursor, conn.remote(self.head))
        waiting = False
        try:
            start = open_now(sub_req)
            if start is None:
                waiting = True
                return self._after_open(conn, sub_req)
            self._go(conn, sub_req, start)
            return None
        finally:
            if not waiting:
                sub_req.release()

    async def _after_open(self, conn: FrontProtocol, sub_req: SubscribeRequest) -> None:
        try:
            self._go(conn, sub_req, await open_channels(sub_req))
        finally:
            sub_req.release()

    def _go(self, conn: FrontProtocol, sub_req: SubscribeRequest, start: Start) -> None:
        """Answer with the backlog (or at once for `?timeout=0`), else hold."""
        head = self.head
        timeout = self.timeout
        if sub_req.expires is not None:  # answered, with its cursor, when its token expires
            timeout = min(timeout, max(0.0, sub_req.expires - time.time()))
        poll: Poll
        if self.plain:
            poll, events = begin(start, PlainPoll, self.bound, conn, None, None)
        else:
            poll, events = begin(start, Poll, self.bound, conn, head, self.callback)
        if events or timeout == 0 or conn.transport.is_closing():
            body = poll.answer(events)[0] if events else longpoll_body([], poll.cursor)
            conn.reply(head, 200, *poll.content(body))
        else:
            sub_req.hand_over()  # to the held poll, which gives slot and channels back
            poll.hold(timeout)
