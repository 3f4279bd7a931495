"""`FrontProtocol`: one per accepted connection, the owner of its byte stream.

It reads request heads (`head.HeadParser`) and serves the subscribe paths itself: the transport
handlers (`web.transports`) answer through it, hold a long-poll on it, or take the connection
away for a held stream. It serves publishes too (`publish.plan`), feeding their bodies to
`publish.Body` as they come (`take_body`). Any other request goes, byte for byte, to an aiohttp
protocol made for this connection on first need (`web.Server`, aiohttp's public protocol
factory) over a `Conduit`; the front end reads nothing more until the app's outermost middleware
reports that aiohttp's answer is complete. A request aiohttp gets with a chunked body leaves the
connection to aiohttp for good, and its answer closes it (`app.json_errors`). Before the next
request the front end serves on the connection, aiohttp's protocol is told the connection is
gone (`connection_lost`), which tears its handler down.

A request that is, by itself, the remembered head with the value the connection's kept
object awaits (a long-poll client's re-poll at its channel's head), whether it is read on an
idle connection or was kept while the answered poll was being done with, is served from the
kept object without looking at the bytes any further (`_serve_kept`).

While a request is in progress (a native one, or aiohttp's), bytes the client sends are kept
until the connection is back to reading heads; once they pass `--max-head-bytes`, reading is
paused until then. Up to that, reading goes on: a long-poll client's next poll often arrives in
the loop turn its answer was written in, before the answered poll is done with, and pausing
and resuming for it would cost two epoll changes per poll.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...core.errors import PushError
from .. import limits
from ..admission import LINGER
from ..cors import ALLOW_HEADERS, ALLOW_METHODS, MAX_AGE, Cors
from ..errors import error_body
from ..proxies import client_address
from . import answer, publish
from .accesslog import log_request
from .conduit import Conduit
from .handshake import HandshakeError
from .head import ASTERISK, HEAD_END, HeadError, HeadParser, RequestHead
from .repeat import Again, Repeat, Repeats
from .wheel import Bucket, Wheel

if TYPE_CHECKING:
    from ..state import ServerState
    from ..transports.exchange import Check, Transport

log = logging.getLogger("pushserver")

HEAD, BUSY, FORWARD, PIPE, GONE = range(5)
"""Reading a head; serving a subscribe request; aiohttp answering one request (`body_left`
bytes of it still to pass on); aiohttp owning the connection for good; given away or closed."""

Probe = Callable[["FrontProtocol", RequestHead, "Check"], None]
"""Answers `HEAD` on a subscribe path with a transport's checks (`transports.probe.handle`)."""

SUBSCRIBE_ALLOW = ("Allow", "GET, HEAD")
"""What a 405 on a subscribe path names."""
SERVER_ALLOW = ("Allow", "GET, HEAD, POST, OPTIONS")
"""What `OPTIONS *` answers: every method some resource of this server serves."""


class Expiring(Protocol):
    """A long-poll as the connection holding it sees it."""

    def expire(self) -> None: ...

    def lost(self) -> None: ...


class Answered(Protocol):
    """A long-poll answered, to be done with once the loop turn that answered it is over."""

    def done(self) -> None: ...


class Kept(Protocol):
    """What an answered request left on its connection for the next one to reuse (`keep`)."""

    def let_go(self) -> None: ...

    def awaits(self) -> str:
        """The value of the remembered head's parameter it is most likely asked with next."""
        ...


class Front:
    """What the front end's connections of one server share."""

    def __init__(
        self,
        state: ServerState,
        http: Callable[[], asyncio.Protocol],
        transports: Mapping[str, Transport],
        probe: Probe,
    ) -> None:
        settings = state.settings
        self.state = state
        self.guard = state.heads
        """Counts the connections receiving a head (`admission.HeadGuard`)."""
        self.http = http
        self.transports = transports
        """The subscribe transports by their path segment (`lp`, `stream`, `sse`, `ws`)."""
        self.probe = probe
        self.loop = asyncio.get_running_loop()
        self.heads = HeadParser(
            settings.max_line_size, settings.max_field_size, settings.max_headers
        )
        self.head_limit = settings.max_head_bytes
        self.timeout = settings.request_timeout
        self.cors = Cors(settings.cors_origins) if settings.cors_origins else None
        self.trusted = settings.trusted_networks
        self.access_log = settings.access_log
        self.connections: set[FrontProtocol] = set()
        self.repeats = Repeats(settings.max_line_size)
        self.wheel = Wheel(self.loop)
        """The deadlines of every connection: idle waits and held polls' hold times."""
        self.answered: list[Answered] = []
        """Long-polls answered in this loop turn, to be done with after it (`after`)."""

    def route(self, path: str) -> Transport | None:
        """The subscribe transport for `path` (`/{segment}/{channels}`, whatever follows the
        segment's slash: the handler refuses what is not a channel list), or None."""
        slash = path.find("/", 1)
        return None if slash < 0 else self.transports.get(path[1:slash])

    def after(self, poll: Answered) -> None:
        """`poll.done()` once the current callback (a fan-out loop) has returned: every poll
        answered in one loop turn in one loop callback, not one each."""
        if not self.answered:
            self.loop.call_soon(self._settle)
        self.answered.append(poll)

    def _settle(self) -> None:
        answered, self.answered = self.answered, []
        for poll in answered:
            try:
                poll.done()
            except Exception:  # one poll's failure is not the others'
                log.exception("finishing an answered long-poll")

    def close_idle(self) -> None:
        """Shutdown: close connections waiting for a request."""
        for conn in list(self.connections):
            if conn.state == HEAD:
                conn.transport.close()


class FrontProtocol(asyncio.Protocol):
    __slots__ = (
        "blocked",
        "body_left",
        "bucket",
        "buffer",
        "conduit",
        "counted",
        "deadline",
        "front",
        "http",
        "http_done",
        "kept",
        "looping",
        "paused",
        "peer",
        "poll",
        "published",
        "raw",
        "repeat",
        "resting",
        "sink",
        "state",
        "task",
        "transport",
    )

    def __init__(self, front: Front) -> None:
        self.front = front
        self.buffer = b""
        """Bytes read and not yet used: immutable, so an idle connection holds none of its own
        and a request read in one piece is used without a copy."""
        self.state = HEAD
        self.http: asyncio.Protocol | None = None
        self.conduit: Conduit | None = None
        self.body_left = 0
        self.http_done = False
        self.paused = False
        self.blocked = False
        """The client is not reading its answers (the transport's buffer is over its high-water
        mark): no further request is served until it is drained."""
        self.looping = False
        self.poll: Expiring | None = None
        """A long-poll (or a request body being read) held on this connection."""
        self.kept: Kept | None = None
        """What the last request left for a repeat of its head (`keep`); let go otherwise."""
        self.sink: Callable[[bytes], bytes] | None = None
        """Where the bytes the client sends go while a request served here reads its body."""
        self.task: asyncio.Task[None] | None = None
        self.bucket: Bucket | None = None
        """Where this connection waits on `front.wheel` for its deadline."""
        self.deadline = 0.0
        self.peer = "-"
        self.counted = False
        """Whether this connection counts as one receiving a head (`admission.HeadGuard`)."""
        self.resting = False
        """Whether it is kept alive, waiting for its next request (`HeadGuard.resting`)."""
        self.raw = b""
        """The head being served, while its handler runs (for `remember`)."""
        self.repeat: Repeat | None = None
        """The last head a handler asked to `remember`."""
        self.published: tuple[bytes, publish.Plan] | None = None
        """The last publish head read and its plan: a publisher sends the same head again and
        again (when its bodies are of one length), parsed and planned once here."""

    # -- the transport's callbacks ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        # Interned: the connections of one client address (a proxy, a NAT) share one string.
        self.peer = sys.intern(str(peer[0])) if isinstance(peer, tuple | list) else "-"
        guard = self.front.guard
        if guard.resting and guard.crowded():
            guard.reclaim()
        refused = guard.full(self.peer)
        if refused is not None:
            self.state = GONE
            self._write_closing(*answer.refusal(refused))
            self.transport.write_eof()  # half-closed a while, so the client reads the answer
            self.front.loop.call_later(LINGER, self.transport.close)
            return
        self.front.connections.add(self)
        self._head_started()
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.resting:
            self._stir()
        if self.state == PIPE:
            assert self.http is not None
            self.http.data_received(data)
            return
        if self.sink is not None:
            data = self.sink(data)
            if not data:
                return
        if self.body_left:
            assert self.http is not None
            body, data = data[: self.body_left], data[self.body_left :]
            self.body_left -= len(body)
            self.http.data_received(body)
            if not self.body_left and self.http_done:
                self.front.loop.call_soon(self._after_http)
            if not data:
                return
        if self.state == HEAD and not self.buffer and self._serve_kept(data):
            return
        self.buffer = self.buffer + data if self.buffer else data
        if self.state == HEAD:
            self._next()
        elif len(self.buffer) > self.front.head_limit:
            self._pause()

    def eof_received(self) -> bool | None:
        if self.http is not None:
            return self.http.eof_received()
        return None

    def pause_writing(self) -> None:
        self.blocked = True
        if self.http is not None:
            self.http.pause_writing()

    def resume_writing(self) -> None:
        self.blocked = False
        if self.http is not None:
            self.http.resume_writing()
        if self.state == HEAD:
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave()
        http, self.http = self.http, None
        if http is not None:
            http.connection_lost(exc)
        poll, self.poll = self.poll, None
        if poll is not None:
            poll.lost()

    def _leave(self) -> None:
        """This protocol is done with the connection (lost, or given away)."""
        self.state = GONE
        self._stir()
        self._let_go_kept()
        self._head_done()
        self.front.connections.discard(self)
        self.front.wheel.cancel(self)

    # -- reading heads -----------------------------------------------------------------------

    def _next(self) -> None:
        """Serve the requests in the buffer, one at a time, while the connection reads heads.

        A request answered without leaving the event loop comes back here through `finish`;
        the loop takes the next one, so pipelined requests do not nest calls."""
        if self.looping:
            return
        self.looping = True
        try:
            self._serve_buffer()
        finally:
            self.looping = False

    def _serve_buffer(self) -> None:
        front = self.front
        while self.state == HEAD:
            if self.blocked:  # pipelined requests wait, unread, until the answers drain
                self._head_started()
                self._pause()
                return
            buf = self.buffer
            if buf.startswith(b"\r\n"):  # tolerated between requests, as aiohttp does
                buf = self.buffer = buf.lstrip(b"\r\n")
            end = buf.find(HEAD_END)
            size = end + len(HEAD_END)
            if end < 0 and len(buf) <= front.head_limit:
                if b"\n\n" in buf:  # a head ended by bare LFs would wait for a CRLF forever
                    self._refuse(
                        400,
                        "bad_request",
                        "request lines must end with CRLF (RFC 9112 section 2.2)",
                    )
                    return
                if buf:
                    self._head_started()  # until its head is whole, as a new connection is
                else:
                    self._rest()  # a request was answered and nothing follows it yet
                self._resume()
                return
            if end < 0 or size > front.head_limit:
                front.state.hub.stats.limits_hit["max_head_bytes"] += 1
                self._refuse(431, "too_large", f"request head larger than {front.head_limit} bytes")
                return
            raw = buf[:size]
            repeat = self.repeat
            value = None if repeat is None else repeat.value(raw)
            if repeat is not None and value is not None:
                self._serve_repeat(repeat, value, buf[size:])
                continue
            self._let_go_kept()  # only a repeat of the head that kept it may use it
            published = self.published
            if published is not None and raw == published[0]:
                self._head_done()
                self._publish(size, published[1])
                continue
            try:
                head = front.heads.parse(raw)
            except HeadError as exc:
                self._refuse(exc.status, exc.code, exc.message)
                return
            self._head_done()
            transport = front.route(head.path)
            plan = None if transport is not None else publish.plan(head, front.state.settings)
            if plan is not None:
                self.published = raw, plan
                self._publish(size, plan)
                continue
            if transport is None:
                if head.path == ASTERISK:
                    self._options_server(head, size)
                else:
                    self._forward(head)
                continue
            if head.body_length:
                self._refuse(400, "bad_request", "a subscribe request has no body")
                return
            self.buffer = buf[size:]
            self._detach_http()
            self.state = BUSY
            self.raw = raw
            try:
                self._serve(transport, head)
            finally:
                self.raw = b""

    def _options_server(self, head: RequestHead, size: int) -> None:
        """`OPTIONS *` (the one request `HeadParser` lets name no path), whose head is the
        buffer's first `size` bytes: the methods the server supports (RFC 9110 section 9.3.7)."""
        if head.body_length:
            self._refuse(400, "bad_request", "OPTIONS * has no body")
            return
        self.buffer = self.buffer[size:]
        self._detach_http()
        self.state = BUSY
        self.reply(head, 204, [SERVER_ALLOW], b"")

    def _serve_kept(self, data: bytes) -> bool:
        """Serve `data`, all the connection has of its next request, when it is the remembered
        head with the value the kept object awaits; False when it is not."""
        kept, repeat = self.kept, self.repeat
        if kept is None or repeat is None or self.blocked:
            return False
        value = kept.awaits()
        if not repeat.holds(data, value):
            return False
        self._serve_repeat(repeat, value, b"")
        return True

    def _serve_repeat(self, repeat: Repeat, value: str, rest: bytes) -> None:
        """Serve a repeat of the remembered head with `value`; `rest` follows it."""
        self._head_done()
        self.buffer = rest
        self._detach_http()
        self.state = BUSY
        self._begin(repeat.parsed.head, repeat.parsed.again, value)

    def _publish(self, size: int, plan: publish.Plan) -> None:
        """Serve a publish whose head is the buffer's first `size` bytes."""
        self.buffer = self.buffer[size:]
        self._detach_http()
        self.state = BUSY
        self._begin(plan.head, publish.handle, plan)

    def _head_started(self) -> None:
        if not self.counted and self.state == HEAD:
            self.counted = True
            self.front.guard.start(self.peer)

    def _rest(self) -> None:
        """Wait for the next request on a kept-alive connection: counted with the unfinished
        heads (a socket held like any other), and the first to go when the server needs room
        (`HeadGuard.reclaim`)."""
        if not self.resting and self.state == HEAD:
            self.resting = True
            self.front.guard.rest(self, self.peer)

    def _stir(self) -> None:
        if self.resting:
            self.resting = False
            self.front.guard.stir(self, self.peer)

    def close_resting(self) -> None:
        """Close this connection, kept alive and waiting for a request, to make room; it no
        longer counts from now on (`HeadGuard.reclaim`)."""
        self._leave()
        self.transport.close()

    def _head_done(self) -> None:
        if self.counted:
            self.counted = False
            self.front.guard.finish(self.peer)

    def _arm(self) -> None:
        """(Re)start the wait for the next head: `--request-timeout`."""
        front = self.front
        front.wheel.wake(self, front.loop.time() + front.timeout)

    def hold(self, poll: Expiring, timeout: float) -> None:
        """Hold `poll` on this connection: told when the client leaves (`lost`), and expired
        (`expire`) after `timeout` seconds unless answered first."""
        self.poll = poll
        front = self.front
        front.wheel.wake(self, front.loop.time() + timeout)

    def due(self) -> None:
        """From the wheel: the idle wait or the held poll's hold time is over."""
        if self.state == HEAD:
            self.transport.close()
        elif self.poll is not None:
            self.poll.expire()

    def _pause(self) -> None:
        if not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self.paused:
            self.paused = False
            self.transport.resume_reading()

    def _refuse(self, status: int, code: str, message: str) -> None:
        """A head the front end cannot route (the buffer's first): answered with a JSON error,
        without it for a HEAD request, then closed."""
        self.state = GONE
        self._head_done()
        body = error_body(code, message)
        self._write_closing(status, [answer.JSON], body, not self.buffer.startswith(b"HEAD "))
        self.transport.close()

    def _write_closing(
        self, status: int, headers: list[tuple[str, str]], body: bytes, send_body: bool = True
    ) -> None:
        """An answer to a request never served, announcing that the connection closes; its
        `Content-Length` is the body's even when the body is not sent (a HEAD's answer)."""
        sent = answer.head(status, headers, "1.1", False, len(body))
        self.transport.write(sent + body if send_body else sent)

    # -- requests aiohttp answers ------------------------------------------------------------

    def _forward(self, head: RequestHead) -> None:
        if self.http is None:
            self.conduit = Conduit(self)
            self.http = self.front.http()
            self.http.connection_made(self.conduit)
        data = self.buffer
        if head.body_length < 0:
            self.state = PIPE
            self.buffer = b""
        else:
            end = head.size + head.body_length
            data, self.buffer = data[:end], data[end:]
            self.body_left = end - len(data)
            self.state = FORWARD
        self.http_done = False
        if self.state == PIPE or self.body_left:
            self._resume()
        self.http.data_received(data)

    def http_answered(self, keep_alive: bool) -> None:
        """From the conduit: aiohttp's answer is out. A closing answer closes the conduit."""
        if self.state == FORWARD and keep_alive:
            self.http_done = True
            if not self.body_left:
                self.front.loop.call_soon(self._after_http)

    def _after_http(self) -> None:
        """Back to reading heads once aiohttp's request handling has run to its end."""
        if self.state == FORWARD and self.http_done:
            self.state = HEAD
            self._arm()
            self._next()

    def http_closed(self, abort: bool) -> None:
        """From the conduit: aiohttp closes the connection."""
        self.state = GONE
        if abort:
            self.transport.abort()
        else:
            self.transport.close()

    def _detach_http(self) -> None:
        """Take the connection back from aiohttp for good; its handler is torn down."""
        http, conduit = self.http, self.conduit
        if http is not None and conduit is not None:
            self.http = self.conduit = None
            conduit.detached = True
            http.connection_lost(None)

    # -- requests served here ----------------------------------------------------------------

    def _serve(self, transport: Transport, head: RequestHead) -> None:
        method = head.method
        if method == "GET":
            self._begin(head, transport.serve, head)
            return
        if method == "HEAD":
            try:
                self.front.probe(self, head, transport.probe)
            except Exception as exc:
                self._failed(head, exc)
            return
        cors = self.front.cors
        if method == "OPTIONS" and cors and "access-control-request-method" in head.headers:
            headers = []
            if cors.headers(head.headers.get("origin")):
                headers = [
                    ("Access-Control-Allow-Methods", ALLOW_METHODS),
                    ("Access-Control-Allow-Headers", ALLOW_HEADERS),
                    ("Access-Control-Max-Age", MAX_AGE),
                ]
            self.reply(head, 204, headers, b"")
            return
        body = error_body("method_not_allowed", "Method Not Allowed")
        self.reply(head, 405, [answer.JSON, SUBSCRIBE_ALLOW], body)

    def _begin(
        self,
        head: RequestHead,
        serve: Callable[[FrontProtocol, Any], Awaitable[None] | None],
        arg: object,
    ) -> None:
        """Serve a request with `serve(self, arg)`; what it returns is awaited in a task."""
        try:
            rest = serve(self, arg)
        except Exception as exc:
            self._failed(head, exc)
            return
        if rest is not None:
            self.task = self.front.loop.create_task(self._run(rest, head))

    def keep(self, kept: Kept) -> None:
        """Leave `kept` for the next request if it repeats the last remembered head (it takes
        it with `take_kept`); any other request, or the connection's end, lets it go."""
        assert self.kept is None  # taken by the request that ends with this call, or let go
        if self.state == GONE:  # lost before the answered request was done with
            kept.let_go()
        else:
            self.kept = kept

    def take_kept(self) -> Kept | None:
        kept, self.kept = self.kept, None
        return kept

    def _let_go_kept(self) -> None:
        kept = self.kept
        if kept is not None:
            self.kept = None
            kept.let_go()

    def remember(self, head: RequestHead, name: str, parsed: Again) -> None:
        """Serve the next head that is this one (being served) but for query parameter `name`
        with `parsed.again`, without parsing it (unless access-logged: its line needs the
        target as sent)."""
        if self.raw and not self.front.access_log:
            self.repeat = self.front.repeats.find(self.raw, head, name, parsed)

    async def _run(self, rest: Awaitable[None], head: RequestHead) -> None:
        me = self.task
        try:
            await rest
        except Exception as exc:
            self._failed(head, exc)
        if self.task is me:
            self.task = None

    def _failed(self, head: RequestHead, exc: Exception) -> None:
        """A request served here that raised: refused with its JSON error (500 if unexpected)."""
        if isinstance(exc, PushError):
            limits.count(self.front.state, exc)
            refusal = answer.refusal(exc)
            if isinstance(exc, HandshakeError):
                refusal[1].extend(exc.headers.items())
        else:
            log.error("unhandled error on %s %s", head.method, head.path, exc_info=exc)
            refusal = 500, [answer.JSON], error_body("internal", "internal server error")
        self.reply(head, *refusal)

    def take_body(self, sink: Callable[[bytes], bytes] | None) -> None:
        """Send what the client sends from now on to `sink`, which keeps the body of the request
        being served and gives back what follows it (None: back to keeping it all here)."""
        self.sink = sink
        if sink is not None:
            self._resume()

    def remote(self, head: RequestHead) -> str:
        """The client's address (from `X-Forwarded-For` when the peer is a trusted proxy)."""
        trusted = self.front.trusted
        if not trusted:
            return self.peer
        forwarded = head.headers.get("x-forwarded-for")
        host = None if self.peer == "-" else self.peer
        return client_address(host, [forwarded] if forwarded else [], trusted) or "-"

    def _cors(self, head: RequestHead) -> list[tuple[str, str]]:
        cors = self.front.cors
        if cors is None:
            return []
        return list(cors.headers(head.headers.get("origin")).items())

    def bare(self, head: RequestHead) -> bool:
        """Whether the answer to `head` goes without CORS headers and an access log line, so
        prebuilt bytes can be written for it (`plain`, `reply_json`)."""
        front = self.front
        return not front.access_log and not (front.cors and "origin" in head.headers)

    def plain(self, head: RequestHead) -> bool:
        """Whether `head` can be answered with `answer.json_answer`'s prebuilt bytes (HTTP/1.1,
        kept alive, `bare`)."""
        return head.version == "1.1" and head.keep_alive and self.bare(head)

    def write_answer(
        self, head: RequestHead, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """Write a whole answer to `head` (CORS headers added); `finish` follows, and closes the
        connection when the head asks for it or the server is draining (the answer says so)."""
        transport = self.transport
        if transport.is_closing():
            return
        length = None if status == 204 else len(body)
        headers = headers + self._cors(head)
        if head.method == "HEAD":  # the head of the answer a GET would get, without its body
            body = b""
        whole = answer.head(status, headers, head.version, self.keeps(head), length) + body
        transport.write(whole)
        self.logged(head, status, len(whole))

    def keeps(self, head: RequestHead) -> bool:
        """Whether the connection stays open after the answer to `head`, as `finish` decides:
        not when the head says close, nor while the server drains."""
        return head.keep_alive and not self.front.state.draining

    def logged(self, head: RequestHead, status: int, sent: int) -> None:
        """An access log line (`sent`: bytes written, the head included, as aiohttp counts)."""
        if self.front.access_log:
            log_request(self.remote(head), head, status, sent)

    def reply(
        self, head: RequestHead, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """Answer `head` and go on with the next request."""
        if self.state == BUSY:
            self.write_answer(head, status, headers, body)
            self.finish(head.keep_alive)

    def reply_head(self, head: RequestHead, status: int, headers: list[tuple[str, str]]) -> None:
        """Answer a HEAD request with the head its GET would begin with, and go on with the next
        request. No `Content-Length`: that GET's body is held open or awaits messages, so its
        length is not known (RFC 9110 section 8.6)."""
        if self.state != BUSY:
            return
        if not self.transport.is_closing():
            headers = headers + self._cors(head)
            sent = answer.head(status, headers, head.version, head.keep_alive)
            self.transport.write(sent)
            self.logged(head, status, len(sent))
        self.finish(head.keep_alive)

    def reply_json(self, head: RequestHead, status: int, body: bytes) -> None:
        """`reply` with a JSON body, from a prebuilt head when no CORS header or access log
        line goes with it."""
        if self.state != BUSY:
            return
        if not self.bare(head):
            self.reply(head, status, [answer.JSON], body)
            return
        keep_alive = self.keeps(head)
        if not self.transport.is_closing():
            self.transport.write(
                answer.whole(status, (answer.JSON,), head.version, keep_alive, body)
            )
        self.finish(keep_alive)

    def finish(self, keep_alive: bool) -> None:
        """The request is answered: read the next one, or close."""
        if self.state != BUSY:
            return
        if not keep_alive or self.front.state.draining or self.transport.is_closing():
            self.state = GONE
            self.transport.close()
            return
        self.state = HEAD
        self._arm()
        if not self.buffer:  # the usual end of a long-poll: nothing sent yet
            self._rest()
            self._resume()
        elif not self._serve_kept(self.buffer):  # a re-poll sent early, or anything else
            self._next()

    def open_stream(
        self, head: RequestHead, status: int, headers: list[tuple[str, str]], chunked: bool
    ) -> asyncio.Transport | None:
        """Send a held response's head and give the connection away (None: the client left).

        `Connection: close` is announced: a held connection is never reused.
        """
        if self.transport.is_closing():
            return None
        sent = answer.head(status, headers + self._cors(head), head.version, False, None, chunked)
        self.transport.write(sent)
        self.logged(head, status, len(sent))
        return self.give_away()[0]

    def upgrade(self, head: RequestHead, accept: str) -> tuple[asyncio.Transport, bytes] | None:
        """Complete a WebSocket handshake and give the connection away, with any bytes the
        client sent after its head (None: the client left)."""
        if self.transport.is_closing():
            return None
        headers = [
            ("Upgrade", "websocket"),
            ("Connection", "upgrade"),
            ("Sec-WebSocket-Accept", accept),
            *self._cors(head),
        ]
        sent = answer.head(101, headers, head.version)
        self.transport.write(sent)
        self.logged(head, 101, len(sent))
        return self.give_away()

    def give_away(self) -> tuple[asyncio.Transport, bytes]:
        """Stop being the connection's protocol; the caller makes another one its protocol.
        Returns the transport and the bytes read but not yet used."""
        self._leave()
        rest, self.buffer = self.buffer, b""
        self._resume()
        return self.transport, rest
