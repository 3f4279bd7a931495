"""`POST /pub/{channel}` and `POST /pub` served by the front end itself: no second parse of the
head, no request object, middleware or response object per publish (see docs/performance.md,
"Publishing"). The rules are `web.publishing`'s, the same aiohttp's handlers follow.

The body is read as it arrives: a `Content-Length` body is cut from the bytes read, a chunked one
is decoded by h11; bytes after it stay on the connection for the next request. `Expect:
100-continue` is answered once the request is admitted. A refusal sent before the whole body was
read closes the connection (half-closed a while, its further bytes read and dropped, so the
client reads the answer); a client that leaves mid-body, or sends it slower than
`--request-timeout`, publishes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import h11

from ...core.broker import Item
from ...core.errors import InvalidInput, PushError
from ...core.names import parse_channel
from .. import limits, publishing
from ..admission import LINGER
from . import answer
from .head import RequestHead

if TYPE_CHECKING:
    from ...config import Settings
    from ...core.messages import Message
    from .protocol import FrontProtocol

BATCH = "/pub"
ONE = "/pub/"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
CHUNKED_HEAD = b"POST / HTTP/1.1\r\nHost: -\r\nTransfer-Encoding: chunked\r\n\r\n"
"""What h11 is told of a chunked request: it only decodes the body (the head is llhttp's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What a publish head says about its request, read once: a publisher sends the same head
    again and again (bodies of one length), and the connection keeps the plan beside it
    (`FrontProtocol.published`)."""

    head: RequestHead
    batch: bool
    limit: int
    """Largest body accepted (`publishing.body_limit`)."""
    as_json: bool
    """Whether the body is published as JSON (`publishing.is_json` of its media type)."""
    authorization: str | None
    """The `Authorization` value as aiohttp would give it."""


def plan(head: RequestHead, settings: Settings) -> Plan | None:
    """The plan of a publish the front end serves itself; None for anything else on these
    paths (other methods, a compressed body), which goes to aiohttp and is answered as before.
    (The head's transfer coding and expectation were checked when it was parsed.)"""
    if head.method != "POST":
        return None
    path = head.path
    if path != BATCH and not path.startswith(ONE):  # `handle` refuses what is not a channel
        return None
    headers = head.headers
    coding = headers.get("content-encoding")
    if coding is not None and coding.strip().lower() != "identity":
        return None
    batch = path == BATCH
    return Plan(
        head,
        batch,
        publishing.body_limit(settings, batch),
        publishing.is_json(_media_type(head)),
        _aiohttp_text(headers.get("authorization")),
    )


def handle(conn: FrontProtocol, plan: Plan) -> Awaitable[None] | None:
    """Publish and answer 201: at once when the body is at hand and the broker needs no wait
    (`Hub.publish_now`), else in what this returns (awaited in a task). A refusal is answered
    by the connection (`FrontProtocol._failed`) when the body was read, else here, closing."""
    state = conn.front.state
    head = plan.head
    data = _at_hand(conn, head.body_length, plan.limit)
    body = None if data is not None else Body(conn, head, plan.limit)
    try:
        publishing.admit(state, conn.remote(head), plan.authorization)
        channel = "" if plan.batch else parse_channel(head.path[len(ONE) :])
        if body is not None:
            if not body.whole:
                body.start()
                return _publish(conn, plan, body, channel, None)
            data = body.take()
        assert data is not None  # at hand with the head, or read by `body`
        items = _items(conn, plan, channel, data)
        published = state.hub.publish_now(items)
    except PushError as exc:
        _refused(conn, head, body, exc)
        return None
    if published is None:
        return _publish(conn, plan, body, channel, items)
    if state.hub.flushing:  # the deliveries go out first, as after `Hub.publish`
        conn.front.loop.call_soon(_created, conn, plan, published)
    else:
        _created(conn, plan, published)
    return None


def _created(conn: FrontProtocol, plan: Plan, published: list[tuple[Message, int]]) -> None:
    """The 201, built (after the flush, when one was due) and sent."""
    conn.reply_json(plan.head, 201, publishing.created(published, plan.batch))


def _at_hand(conn: FrontProtocol, length: int, limit: int) -> bytes | None:
    """The body, taken from the connection's buffer, when it came whole with the head (the
    usual publish: a `Content-Length` body within `limit`); None when `Body` must read it."""
    buffer = conn.buffer
    if not 0 <= length <= limit or length > len(buffer):
        return None
    if length == len(buffer):
        conn.buffer = b""
        return buffer
    conn.buffer = buffer[length:]
    return buffer[:length]


async def _publish(
    conn: FrontProtocol, plan: Plan, body: Body | None, channel: str, items: list[Item] | None
) -> None:
    """The rest of `handle` when the body is still to come or the broker must be waited for
    (`body` None: it came whole with the head)."""
    state = conn.front.state
    head = plan.head
    try:
        if items is None:
            assert body is not None
            items = _items(conn, plan, channel, await body.read())
        created = await publishing.publish(state, items, batch=plan.batch)
    except PushError as exc:
        _refused(conn, head, body, exc)
        return
    except ConnectionError:
        return  # the client left, or stalled, mid-body: nothing was published
    conn.reply_json(head, 201, created)


def _items(conn: FrontProtocol, plan: Plan, channel: str, data: bytes) -> list[Item]:
    """The messages of a publish whose body is `data` (`channel` empty for a batch)."""
    key = plan.head.headers.get("idempotency-key")
    if plan.batch:
        return publishing.batch_items(data, conn.front.state.settings, key)
    return publishing.one_item(channel, data, key, plan.as_json)


def _refused(conn: FrontProtocol, head: RequestHead, body: Body | None, exc: PushError) -> None:
    """Raise `exc` for the connection to answer when the body was read, else answer it here."""
    if body is None or body.whole:
        raise exc
    limits.count(conn.front.state, exc)
    _refuse_closing(conn, head, body, exc)


def _aiohttp_text(value: str | None) -> str | None:
    """A header value (read as latin-1) as aiohttp gives it: UTF-8, bad bytes as surrogates."""
    if value is None or value.isascii():
        return value
    return value.encode("latin-1").decode("utf-8", "surrogateescape")


def _media_type(head: RequestHead) -> str:
    return head.headers.get("content-type", "").partition(";")[0].strip().lower()


def _refuse_closing(conn: FrontProtocol, head: RequestHead, body: Body, exc: PushError) -> None:
    """Answer a request whose body is still (partly) unread, then let the connection go."""
    body.detach(conn)
    if conn.transport.is_closing():
        return
    conn.write_answer(dataclasses.replace(head, keep_alive=False), *answer.refusal(exc))
    transport, _ = conn.give_away()
    transport.set_protocol(Discard())
    transport.write_eof()
    conn.front.loop.call_later(LINGER, transport.close)


class Discard(asyncio.Protocol):
    """A refused connection's last seconds: what the client still sends is read and dropped,
    so closing does not reset the connection under the answer."""

    def data_received(self, data: bytes) -> None:
        pass


class Body:
    """A publish request's body, at most `limit` bytes, read from the connection as it comes."""

    __slots__ = (
        "chunked",
        "chunks",
        "conn",
        "expect",
        "failure",
        "left",
        "limit",
        "size",
        "waiter",
    )

    def __init__(self, conn: FrontProtocol, head: RequestHead, limit: int) -> None:
        self.conn = conn
        self.limit = limit
        self.chunks: list[bytes | bytearray] = []
        self.size = 0
        self.failure: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.expect = head.headers.get("expect") is not None and head.version == "1.1"
        self.chunked: h11.Connection | None = None
        self.left = head.body_length
        """Bytes still to come of a Content-Length body; 0 once the body is whole."""
        if head.body_length < 0:
            self.chunked = h11.Connection(h11.SERVER)
            self.chunked.receive_data(CHUNKED_HEAD)
        elif head.body_length > limit:
            self.failure = publishing.too_large(limit)
            return
        buffered, conn.buffer = conn.buffer, b""
        conn.buffer = self.feed(buffered)

    @property
    def whole(self) -> bool:
        return self.left == 0

    def feed(self, data: bytes) -> bytes:
        """Take the body's part of `data`; returns what follows the body."""
        if self.failure is not None or not self.left or not data:
            return data  # (no bytes is not an end: h11 would take it for the client's close)
        if self.chunked is None:
            part, rest = data[: self.left], data[self.left :]
            self.left -= len(part)
            self._add(part)
            if not self.left:
                self._done()
            return rest
        self.chunked.receive_data(data)
        try:
            while True:
                event = self.chunked.next_event()
                if event is h11.NEED_DATA:
                    return b""
                if isinstance(event, h11.Data):
                    self._add(event.data)
                    if self.failure is not None:
                        return b""
                elif isinstance(event, h11.EndOfMessage):
                    self.left = 0
                    self._done()
                    return bytes(self.chunked.trailing_data[0])
        except h11.RemoteProtocolError:
            self._fail(InvalidInput("bad_request", "malformed chunked request body"))
            return b""

    def _add(self, part: bytes | bytearray) -> None:
        self.chunks.append(part)
        self.size += len(part)
        if self.size > self.limit:
            self._fail(publishing.too_large(self.limit))

    def start(self) -> None:
        """The request is admitted: take the rest of the body as it comes (`Expect` answered).
        Called before the handler returns to the connection, which may read more at once."""
        if self.left and self.failure is None:
            conn = self.conn
            if self.expect:
                conn.transport.write(CONTINUE)
            self.waiter = conn.front.loop.create_future()
            conn.hold(self, conn.front.timeout)
            conn.take_body(self.feed)

    async def read(self) -> bytes:
        """The whole body once `start`ed; raises its refusal (413, 400), or ConnectionError
        when the client leaves or stalls first."""
        if self.waiter is not None:
            await self.waiter
        return self.take()

    def take(self) -> bytes:
        """The body once `whole` (or failed): `read` without the wait."""
        if self.failure is not None:
            raise self.failure
        return b"".join(self.chunks)

    def _done(self) -> None:
        self.detach(self.conn)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.failure is None:
            self.failure = exc
        self._done()

    def detach(self, conn: FrontProtocol) -> None:
        """The connection stops feeding and timing this body."""
        if conn.poll is self:
            conn.poll = None
        conn.take_body(None)

    # -- as the connection holding it sees it (`protocol.Expiring`) -----------------------------

    def expire(self) -> None:
        self._fail(ConnectionError("request body not received within --request-timeout"))
        self.conn.transport.close()

    def lost(self) -> None:
        self._fail(ConnectionError("the client left mid-body"))
