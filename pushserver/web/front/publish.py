"""`POST /pub/{channel}` and `POST /pub`, read from the connection: no request object,
middleware or response object per publish (docs/performance.md, "Publishing"). The rules are
`web.publishing`'s.

The body is read as it arrives (`Exchange.body`, `http.body`): a `Content-Length` body is cut
from the bytes read, a chunked one decoded by h11, a gzip or deflate one decompressed by zlib
(another content coding is refused with 415); bytes after it stay on the connection for the
next request. `Expect: 100-continue` is answered once the request is admitted. A refusal sent
before the whole body was read closes the connection (half-closed a while, its further bytes
read and dropped, so the client reads the answer); a client that leaves mid-body, or sends it
slower than `--request-timeout`, publishes nothing.

A publisher sends the same head again and again, only its `Content-Length` changing: its
`Plan` is made once and the connection serves the repeats from it (`Exchange.remember`), with
the length each repeat gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final

from ...core.broker import Item
from ...core.errors import PushError
from ...core.names import is_channel, parse_channel
from .. import limits, publishing
from ..errors import ACCEPT_ENCODING, UnsupportedEncoding
from ..http import answer
from ..http.body import CODINGS, Body, coding_of
from ..http.request import RequestHead

if TYPE_CHECKING:
    from ...config import Settings
    from ...core.messages import Message
    from ..transports.exchange import Exchange

BATCH: Final = "/pub"
ONE: Final = "/pub/"


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What a publish head says about its request, read once."""

    head: RequestHead
    batch: bool
    limit: int
    """Largest body accepted, decoded (`publishing.body_limit`)."""
    as_json: bool
    """Whether the body is published as JSON (`publishing.is_json` of its media type)."""
    authorization: str | None
    """The `Authorization` value as aiohttp would give it."""
    coding: str | None
    """The body's content coding (`http.body.CODINGS`), None for none."""
    expect: bool
    """Whether the client waits for `100 Continue` before it sends the body."""
    channel: str | None
    """The channel a `POST /pub/{channel}` names ("" for a batch), checked once per head: None
    when the name is not one (refused, after the rules, where a request would be)."""
    key: str | None
    """The `Idempotency-Key` value, as sent (checked per publish, after the body is read)."""

    def again(self, conn: Exchange, value: str) -> Awaitable[None] | None:
        """Serve a repeat of this head: `value` is its `Content-Length` (empty: the very same
        bytes, a head without one)."""
        return serve(conn, self, int(value) if value else self.head.body_length)


def plan(head: RequestHead, settings: Settings) -> Plan:
    """The plan of a `POST` on a publish path; raises UnsupportedEncoding for a content coding
    the server does not read. (The head's transfer coding and expectation were checked when
    it was parsed.)"""
    headers = head.headers
    coding = coding_of(headers.get("content-encoding"))
    if coding is not None and coding not in CODINGS:
        raise UnsupportedEncoding(
            "unsupported_encoding",
            f"content coding {coding[:40]!r} is not read; send {ACCEPT_ENCODING}, or none",
        )
    batch = head.path == BATCH
    return Plan(
        head,
        batch,
        publishing.body_limit(settings, batch),
        publishing.is_json(_media_type(head)),
        _aiohttp_text(headers.get("authorization")),
        coding,
        "expect" in headers and head.version == "1.1",
        "" if batch else _channel(head),
        headers.get("idempotency-key"),
    )


def handle(conn: Exchange, head: RequestHead) -> Awaitable[None] | None:
    """Plan the publish and serve it; its repeats are served from the plan."""
    try:
        planned = plan(head, conn.state.settings)
    except PushError as exc:
        if not head.body_length:
            raise
        _refuse_unread(conn, head, exc)
        return None
    conn.remember(head, None, planned)
    return serve(conn, planned, head.body_length)


def serve(conn: Exchange, plan: Plan, length: int) -> Awaitable[None] | None:
    """Publish and answer 201: at once when the body is at hand and the broker needs no wait
    (`Hub.publish_now`), else in what this returns (awaited in a task). A refusal is answered
    by the connection when the body was read, else here, closing. `length` is the body's
    (`RequestHead.body_length` of this request's head)."""
    state = conn.state
    head = plan.head
    body = conn.body(length, plan.limit, plan.coding)
    try:
        publishing.admit(state, conn.remote(head), plan.authorization)
        channel = plan.channel
        if channel is None:
            channel = parse_channel(_named(head))  # raises: the name is not a channel's
        if isinstance(body, Body):
            rest = conn.read_rest(body, plan.expect)
            if rest is not None:
                return _publish(conn, plan, body, rest, channel)
            data = body.take()
        else:
            data = body
        items = _items(conn, plan, channel, data)
        published = state.hub.publish_now(items)
    except PushError as exc:
        _refused(conn, head, body, exc)
        return None
    if published is None:
        return _publish_later(conn, plan, items)
    # The deliveries go out first, as after `Hub.publish`, and the 201 in the flush's callback.
    if not state.hub.after_flush(_created, (conn, plan, published)):
        _created(conn, plan, published)
    return None


def _created(conn: Exchange, plan: Plan, published: list[tuple[Message, int]]) -> None:
    """The 201, built (after the flush, when one was due) and sent."""
    conn.reply(plan.head, 201, answer.JSON_ONLY, publishing.created(published, plan.batch))


async def _publish(
    conn: Exchange, plan: Plan, body: Body, rest: Awaitable[None], channel: str
) -> None:
    """The rest of `serve` when the body is still to come."""
    try:
        await rest
        items = _items(conn, plan, channel, body.take())
    except PushError as exc:
        _refused(conn, plan.head, body, exc)
        return
    except ConnectionError:
        return  # the client left, or stalled, mid-body: nothing was published
    await _publish_later(conn, plan, items)


async def _publish_later(conn: Exchange, plan: Plan, items: list[Item]) -> None:
    """The rest of `serve` when the broker must be waited for (Redis)."""
    created = await publishing.publish(conn.state, items, batch=plan.batch)
    conn.reply(plan.head, 201, answer.JSON_ONLY, created)


def _items(conn: Exchange, plan: Plan, channel: str, data: bytes) -> list[Item]:
    """The messages of a publish whose body is `data` (`channel` empty for a batch)."""
    if plan.batch:
        return publishing.batch_items(data, conn.state.settings, plan.key)
    return publishing.one_item(channel, data, plan.key, plan.as_json)


def _refused(conn: Exchange, head: RequestHead, body: bytes | Body, exc: PushError) -> None:
    """Raise `exc` for the connection to answer when the body was read, else answer it here."""
    if isinstance(body, bytes) or body.whole:
        raise exc
    _refuse_unread(conn, head, exc)


def _refuse_unread(conn: Exchange, head: RequestHead, exc: PushError) -> None:
    limits.count(conn.state, exc)
    conn.refuse_unread(head, *answer.refusal(exc))


def _aiohttp_text(value: str | None) -> str | None:
    """A header value (read as latin-1) as aiohttp gives it: UTF-8, bad bytes as surrogates."""
    if value is None or value.isascii():
        return value
    return value.encode("latin-1").decode("utf-8", "surrogateescape")


def _named(head: RequestHead) -> str:
    """The channel name a `POST /pub/{channel}`'s path gives, unchecked."""
    return head.path[len(ONE) :]


def _channel(head: RequestHead) -> str | None:
    """The channel a `POST /pub/{channel}` names, None when the name is not one."""
    name = _named(head)
    return name if is_channel(name) else None


def _media_type(head: RequestHead) -> str:
    return head.headers.get("content-type", "").partition(";")[0].strip().lower()
