"""`GET /lp/{channels}`: answer at once with what is buffered after the cursor, or hold the
request until a message comes or the timeout passes. `?callback=` wraps the answer as JSONP.

A held poll is a `Poll` held by its connection (`Exchange.hold`): no task or handler waits for
it. A plain HTTP/1.1 keep-alive poll (no JSONP, no CORS) is a `PlainPoll`, whose whole answer
the fan-out builds once for all such waiters and writes to each socket itself. Once answered,
a kept-alive connection reads its next request on the same protocol."""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final

from ...core.errors import InvalidInput, PushError, draining
from ...core.positions import cursor_part
from ...core.subscription import Bound, LocalChannel, Start, Waiter
from ...wire.framing import longpoll_body
from ..http import answer
from ..http.answer import JSON, NO_CACHE, json_answer
from ..http.coding import VARY, Accepts
from ..http.request import RequestHead
from ..state import ServerState
from . import probe
from .coding import accepted, encoded, gzip_json_answer, script_safe
from .common import (
    Subscribe,
    SubscribeRequest,
    backlog_after,
    begin,
    int_param,
    open_channels,
    open_now,
    parse_subscribe,
    reserve,
)
from .exchange import Headers, Kept, Settling, Transport

if TYPE_CHECKING:
    from ...config import Settings
    from .exchange import Exchange

NAME: Final = "longpoll"
"""The transport's name (`/stats`, `/metrics`, the connection counts); its path is `/lp/`."""
CALLBACK_RE: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]{0,63}")
SECONDS_RE: Final = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
JAVASCRIPT: Final = ("Content-Type", "application/javascript")
BOUNDS: Final = functools.lru_cache(maxsize=256)(Bound)
"""A `Bound` shared by the polls that ask for the same limit: a held poll keeps its bound, 64
bytes each when made per poll. Bounded, as `?limit` is the client's to vary."""


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
    return BOUNDS(
        int_param(query, "limit", cap, 1, cap, clamp=True), state.settings.longpoll_max_bytes
    )


def _plain(settings: Settings, head: RequestHead) -> bool:
    """Whether `head`'s answer can be prebuilt bytes (`PlainPoll`): HTTP/1.1, kept alive, no
    CORS header or access log line to go with it."""
    return (
        head.version == "1.1"
        and head.keep_alive
        and not settings.access_log
        and not (settings.cors_origins and "origin" in head.headers)
    )


def _callback(query: Mapping[str, str]) -> str | None:
    callback = query.get("callback")
    if not callback:  # empty is as if not given, as for every other parameter
        return None
    if not CALLBACK_RE.fullmatch(callback):
        raise InvalidInput("bad_parameter", "?callback must be a JavaScript identifier")
    return callback


class Poll(Waiter, Settling):
    """A long-poll on a front-end connection; answered once (`replied`), by the fan-out, its
    hold time running out, a drain, or not at all when the client leaves first (`lost`)."""

    __slots__ = ("conn", "replied")

    def __init__(self, start: Start, bound: Bound, conn: Exchange) -> None:
        super().__init__(start, bound)
        self.conn = conn
        self.replied = False

    def content(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        """Headers and body of the answer carrying `body`."""
        return [NO_CACHE, JSON], body

    def encoded(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        """`content` as the request accepts it (gzip from `GZIP_MIN_BYTES`)."""
        return self.content(body)

    def keeps_alive(self) -> bool:
        """Whether its connection is kept alive after its answer (if the server goes on)."""
        return True

    def hold(self, timeout: float) -> None:
        """Wait for a message, at most `timeout` seconds."""
        conn = self.conn
        conn.state.hub.add_waiter(self)
        conn.hold(self, timeout)

    def done(self) -> None:
        """From the front end, after the answer: the connection goes on to its next request."""
        conn = self.conn
        self._leave()
        self.release()
        conn.finish(self.keeps_alive())

    def _leave(self) -> None:
        """No longer held: out of the fan-out, its connection slot given back."""
        state = self.conn.state
        state.hub.remove_waiter(self)
        state.admission.leave(NAME, self.remote)

    def release(self) -> None:
        """Give back its channels (the end of a poll not held again)."""
        self.conn.state.hub.release(self.channels)

    def lost(self) -> None:
        """The client left while the poll waited."""
        if not self.replied:
            self.replied = True
            self._leave()
            self.release()


class HeadedPoll(Poll):
    """A poll whose answer depends on its head: JSONP (`?callback=`), CORS headers, an access
    log line, HTTP/1.0 or a connection that closes after it. It keeps its head and callback; a
    plain poll (`PlainPoll`), the usual one, keeps neither."""

    __slots__ = ("callback", "head")

    def __init__(
        self, start: Start, bound: Bound, conn: Exchange, head: RequestHead, callback: str | None
    ) -> None:
        super().__init__(start, bound, conn)
        self.head = head
        self.callback = callback

    def content(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        """Headers and body of the answer carrying `body` (as JSONP with `?callback=`)."""
        if self.callback is None:
            return [NO_CACHE, JSON], body
        return [NO_CACHE, JAVASCRIPT], b"%b(%b);" % (self.callback.encode(), script_safe(body))

    def encoded(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        return encoded(*self.content(body), accepted(self.conn.state.settings, self.head))

    def keeps_alive(self) -> bool:
        return self.head.keep_alive

    def resolve(self, body: bytes) -> None:
        if not self.replied:
            self.replied = True
            self.conn.answer(self.head, 200, *self.encoded(body))
            # Done with after the fan-out loop: it is iterating the hub's waiters, and the last
            # waiter's answer should not wait for the others'.
            self.conn.settle(self)


class PlainPoll(Poll, Kept):
    """A plain HTTP/1.1 keep-alive poll, answered with bytes the fan-out prebuilt.

    Answered, a poll of one channel that has had a message stays with its connection, awaiting
    the client's next poll (`Exchange.keep`): still counted as a held long-poll (its slot kept,
    not counted out and back in), its connection not resting in the door (not closed to make
    room as an idle keep-alive would be), its channel still open. Its re-poll holds it again
    (`reuse`); anything else lets it go (`let_go`): slot and channel given back, once."""

    __slots__ = ()

    def wrapper(self) -> Callable[[bytes], bytes]:
        return json_answer

    def done(self) -> None:
        conn = self.conn
        ch = self.single
        if ch is None or ch.unstarted:  # nothing kept: no state held that would otherwise go
            super().done()
            return
        conn.state.hub.remove_waiter(self)  # answered by its hold time: still registered
        conn.keep(self)  # for the client's next poll, which the channel most likely awaits
        conn.finish(True)

    def let_go(self) -> None:
        """Not held again: its slot and its channels given back."""
        self.conn.state.admission.leave(NAME, self.remote)
        self.release()

    def awaits(self) -> str:
        """The cursor it is most likely asked with: where its channel is."""
        ch = self.single
        assert ch is not None  # only a one-channel poll is kept
        return ch.sent_position

    def reuse(self, request: PollRequest, cursor: str) -> bool:
        """Serve `request`'s head with `cursor` with this kept poll: hold it again when the
        cursor is where its channel is (nothing to answer with, so nothing to look up), or
        answer at once with what the channel has had since (the same answer for every client
        at that cursor, built once) and keep it again. Else let it go and return False: the
        request is then served as a new poll. So is a cursor the broker has yet to catch up
        with: behind a load balancer, a connection's next poll may carry a cursor another node
        gave, past what this one has had from the broker (`backlog_after`)."""
        ch = self.single
        conn = self.conn
        state = conn.state
        subscribe = request.subscribe
        if (
            ch is None
            or (subscribe.expires is not None and not subscribe.fresh())
            or ch.pending
            or request.timeout == 0
            or conn.closing()
            or not state.hub.current(ch)
        ):
            self.let_go()
            return False
        if cursor == ch.sent_position:
            if state.draining:
                self.let_go()
                raise draining()
            self.replied = False
            self.hold(request.timeout if subscribe.expires is None else request.hold_time())
            return True
        try:
            body = request.missed.body(self, cursor)
            if state.draining:
                raise draining()
        except PushError:
            self.let_go()
            raise
        if body is None:
            self.let_go()
            return False
        conn.send(self.wrapper()(body))
        conn.keep(self)
        conn.finish(True)
        return True

    def resolve(self, body: bytes) -> None:
        if self.conn.state.draining:  # the connection closes after it: the head says so
            headers, body = self.encoded(body)
            self.send(answer.whole(200, tuple(headers), "1.1", False, body))
        else:
            self.send(self.wrapper()(body))

    def send(self, answer: bytes) -> None:
        if not self.replied:
            self.replied = True
            conn = self.conn
            conn.send(answer)
            conn.settle(self)


class GzipPlainPoll(PlainPoll):
    """A plain poll whose request accepts gzip (and its answer as it is)."""

    __slots__ = ()

    def wrapper(self) -> Callable[[bytes], bytes]:
        return gzip_json_answer

    def encoded(self, body: bytes) -> tuple[list[tuple[str, str]], bytes]:
        return encoded(*self.content(body), Accepts(True, True))


def handle(conn: Exchange, head: RequestHead) -> Awaitable[None] | None:
    """Answer or hold the poll at once when the broker has its channels at hand (no task);
    else return what finishes it once the broker has been waited for."""
    state = conn.state
    if state.draining:
        raise draining()
    poll = PollRequest.parse(conn, head)
    conn.remember(head, "cursor", poll)
    return poll.serve(conn, head.query.get("cursor", ""))


MISSED_KEPT_BYTES: Final = 4096
"""Largest answer `Missed` keeps: every distinct poll head keeps at most one."""


class Missed:
    """The last answer built for a poll behind its channel's head, for the polls with the same
    head and cursor that follow: after a fan-out that outran the clients' re-polls, a
    channel's clients all re-poll with the cursor of the answer before. Valid while the
    channel holds what it held (the same epoch, last id sent and oldest id buffered)."""

    __slots__ = ("answer", "key")

    def __init__(self) -> None:
        self.key: tuple[str, str, int, int, str] | None = None
        self.answer: bytes | None = None

    def body(self, poll: PlainPoll, cursor: str) -> bytes | None:
        """The answer body for `poll` (a kept one-channel poll of this head) at `cursor`, or
        None when the channel has nothing for it or the broker has yet to catch up with
        `cursor` (never kept: the next asks again); raises InvalidInput for a bad cursor."""
        ch = poll.single
        assert ch is not None
        last = _one_behind(ch, cursor)
        if last is not None:
            return last
        key = (ch.name, ch.epoch, ch.sent_id, ch.history.first, cursor)
        if key == self.key:
            return self.answer
        events = backlog_after(poll.conn.state, poll.channels, cursor, poll.bound.events + 1)
        if events is None:
            return None
        answer = poll.answer(events)[0] if events else None
        if answer is None or len(answer) <= MISSED_KEPT_BYTES:
            self.key, self.answer = key, answer
        return answer


def _one_behind(ch: LocalChannel, cursor: str) -> bytes | None:
    """The answer for a cursor one message behind `ch`'s head, from the history's last entry,
    without reading the cursor or building a backlog: a one-to-one client's re-poll, read
    after the publish it raced with (a new body per message, so `Missed` keeps none). None
    for any other cursor, or when the history no longer has that message."""
    sent = ch.sent_id
    history = ch.history
    if history.last_id != sent or cursor != cursor_part(ch.name, ch.epoch, sent - 1):
        return None
    last = history.messages(sent - 1, sent)
    if not last or last[0].epoch != ch.epoch:
        return None
    position = ch.sent_position
    return longpoll_body([last[0].body(position.encode())], position)


@dataclasses.dataclass(slots=True, frozen=True, eq=False)
class PollRequest:
    """A poll's head, parsed, but for its cursor: the same for every re-poll of a client, so
    the front end serves those from it (`again`)."""

    head: RequestHead
    subscribe: Subscribe
    timeout: float
    callback: str | None
    bound: Bound
    plain: type[PlainPoll] | None
    """The class of its poll when it is a plain one (`_plain`, no JSONP, gzip or not)."""
    missed: Missed = dataclasses.field(default_factory=Missed)

    @classmethod
    def parse(cls, conn: Exchange, head: RequestHead) -> PollRequest:
        state = conn.state
        query = head.query
        settings = state.settings
        subscribe = parse_subscribe(state, head, NAME)
        timeout = _timeout(query, settings.default_timeout, settings.max_timeout)
        callback = _callback(query)
        bound = _bound(query, state)
        plain: type[PlainPoll] | None = None
        if callback is None and _plain(settings, head):
            coding = accepted(settings, head)
            if coding is None or not coding.gzip:
                plain = PlainPoll
            elif coding.identity:  # refused, it is rare enough for a HeadedPoll
                plain = GzipPlainPoll
        return cls(head, subscribe, timeout, callback, bound, plain)

    def again(self, conn: Exchange, cursor: str) -> Awaitable[None] | None:
        """Serve this head again with `cursor` (its token checked again when near expiry),
        holding the connection's kept poll again when it can."""
        kept = conn.take_kept()
        if kept is not None:
            assert isinstance(kept, PlainPoll)  # only a plain poll is kept, for its own head
            if kept.reuse(self, cursor):
                return None
        if self.subscribe.fresh():
            return self.serve(conn, cursor)
        return PollRequest.parse(conn, self.head).serve(conn, cursor)

    def hold_time(self) -> float:
        """How long a poll of this head is held: its timeout, cut short by its token's expiry
        (it is then answered with its cursor)."""
        expires = self.subscribe.expires
        if expires is None:
            return self.timeout
        return min(self.timeout, max(0.0, expires - time.time()))

    def serve(self, conn: Exchange, cursor: str) -> Awaitable[None] | None:
        state = conn.state
        sub_req = reserve(
            state, self.subscribe, cursor, conn.remote(self.head), self.bound.events + 1
        )
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

    async def _after_open(self, conn: Exchange, sub_req: SubscribeRequest) -> None:
        try:
            self._go(conn, sub_req, await open_channels(sub_req))
        finally:
            sub_req.release()

    def _go(self, conn: Exchange, sub_req: SubscribeRequest, start: Start) -> None:
        """Answer with the backlog (or at once for `?timeout=0`), else hold."""
        head = self.head
        timeout = self.hold_time()
        poll: Poll
        if self.plain is not None:
            poll, events = begin(start, self.plain, self.bound, conn)
        else:
            poll, events = begin(start, HeadedPoll, self.bound, conn, head, self.callback)
        if events or timeout == 0 or conn.closing():
            body = poll.answer(events)[0] if events else longpoll_body([], poll.cursor)
            conn.reply(head, 200, *poll.encoded(body))
        else:
            sub_req.hand_over()  # to the held poll, which gives slot and channels back
            poll.hold(timeout)


def check(conn: Exchange, head: RequestHead) -> Headers:
    """The checks of `handle`, in its order, nothing held."""
    poll = PollRequest.parse(conn, head)
    probe.check_subscription(conn, head, poll.subscribe, head.query.get("cursor", ""))
    headers = [NO_CACHE, JSON if poll.callback is None else JAVASCRIPT]
    coding = accepted(conn.state.settings, head)
    if coding is not None and coding.gzip:  # gzip or not, the GET's length says
        headers.append(VARY)
    return headers


TRANSPORT: Final = Transport("lp", NAME, handle, check)
