"""`Connection`: one HTTP/1.1 connection's requests and answers, apart from I/O.

Bytes the client sends go in (`receive`). Each request head is found (one `find`, bounded by
`--max-head-bytes`), parsed (`http.parser`, httptools) and routed (`routes.Routes`) to a
handler, which answers through the connection (the `transports.exchange.Exchange` interface);
answers go out as bytes to `out` (the socket's transport: `write`, `is_closing`). What else the
connection needs of the world beneath it, it asks of its `io` (`Io`): close, pause and resume
reading, a deadline, the door's counts, the socket given away. In the server `io` is the
asyncio adapter (`protocol.FrontProtocol`); a test gives a fake and no socket.

One request at a time (`IDLE` reading heads, `BUSY` serving one, `DONE` closed or given away).
Bytes a client sends while its request is in progress are kept until the connection is back to
reading heads; reading pauses only once they pass `--max-head-bytes`: a long-poll client's next
poll often arrives in the loop turn its answer was written in, and pausing and resuming for it
would cost two epoll changes per poll. Pipelined requests are served one after the other from
one loop (`_next`), never nested. While the client does not read its answers (`writable`), no
further request is served.

Two parts of it live in modules of their own, sharing its state (`base.Base`): the re-poll
fast path (`repoll.Repolls`: a head seen before is served without a parse, and a long-poll's
re-poll at its channel's head is held by the poll it answered) and request bodies
(`bodies.Bodies`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ...core.errors import PushError
from .. import limits
from ..admission import OPERATOR_PATHS
from ..errors import error_body
from ..http import answer
from ..http.accesslog import log_request
from ..http.parser import HEAD_END, HeadError
from ..http.request import RequestHead
from ..proxies import client_address
from ..transports.handshake import HandshakeError
from . import BUSY, DONE, IDLE, forward
from .base import Io, Out, Serve
from .repoll import Repolls

if TYPE_CHECKING:
    from ..state import ServerState
    from ..transports.exchange import Headers, Held, Kept, Settling
    from .forward import Forwarding
    from .protocol import Front
    from .repoll import Repeat

log = logging.getLogger("pushserver")


class Connection(Repolls):
    __slots__ = ()

    def __init__(self, front: Front, io: Io, out: Out) -> None:
        self.front = front
        self.state = front.state
        self.io = io
        self.out = out
        self.buffer = b""
        """Bytes read and not yet used: immutable, so an idle connection holds none of its own
        and a request read in one piece is used without a copy."""
        self.phase = IDLE
        self.blocked = False
        """The client is not reading its answers (the transport's buffer is over its high-water
        mark): no further request is served until it is drained."""
        self.looping = False
        self.held: Held | None = None
        """What the request in progress waits on (a long-poll, a body being read)."""
        self.reader: Callable[[bytes], bytes] | None = None
        """Where the bytes the client sends go while the request in progress reads its body; it
        gives back what follows the body."""
        self.raw = b""
        """The head being routed, while its handler is called (for `remember`, aiohttp)."""
        self.http: Forwarding | None = None
        """aiohttp's protocol for this connection, from its first request for aiohttp until it
        serves one itself (`forward.py`)."""
        self.kept: Kept | None = None
        """What the last request left for a repeat of its head (`keep`); let go otherwise."""
        self.repeat: Repeat | None = None
        """The last head a handler asked to `remember`."""

    # -- from the I/O beneath ----------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Bytes the client sent."""
        reader = self.reader
        if reader is not None:
            data = reader(data)
            if not data:
                return
        phase = self.phase
        if phase == IDLE:
            if not self.buffer and self.kept is not None and self._serve_kept(data):
                return
            self.buffer = self.buffer + data if self.buffer else data
            self._next()
        elif phase == BUSY:
            self.buffer = self.buffer + data if self.buffer else data
            if len(self.buffer) > self.front.head_limit:
                self.io.pause()

    def writable(self, writable: bool) -> None:
        """The client reads its answers again (True), or stopped (False)."""
        self.blocked = not writable
        if self.http is not None:
            self.http.writable(writable)
        if writable and self.phase == IDLE:
            self._next()

    def due(self) -> None:
        """The deadline `io.wait` set is met: the wait for a head, or what is held."""
        if self.phase == IDLE:
            self.io.close()
        elif self.held is not None:
            self.held.expire()

    def lost(self, exc: Exception | None = None) -> None:
        """The client is gone."""
        self.phase = DONE
        self._let_go_kept()
        http, self.http = self.http, None
        if http is not None:
            http.lost(exc)
        held, self.held = self.held, None
        if held is not None:
            held.lost()

    # -- reading requests ----------------------------------------------------------------------

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
        io = self.io
        while self.phase == IDLE:
            if self.blocked:  # pipelined requests wait, unread, until the answers drain
                io.waiting(True)  # as a connection still sending its head, not reading
                io.pause()
                return
            buf = self.buffer
            if not buf:  # the usual end, every request read served: said without the searches
                io.waiting(False)  # below (`b"\n\n" in b""` alone raises and clears an error)
                return
            if buf[0] == 0x0D and buf.startswith(b"\r\n"):  # tolerated between requests,
                buf = self.buffer = buf.lstrip(b"\r\n")  # as aiohttp does
            end = buf.find(HEAD_END)
            size = end + len(HEAD_END)
            if end < 0 and len(buf) <= front.head_limit:
                if b"\n\n" in buf:  # a head ended by bare LFs would wait for a CRLF forever
                    message = "request lines must end with CRLF (RFC 9112 section 2.2)"
                    self._refuse(400, "bad_request", message)
                    return
                io.waiting(bool(buf))  # a head begun, or nothing since the last answer
                return
            if end < 0 or size > front.head_limit:
                self.state.hub.stats.limits_hit["max_head_bytes"] += 1
                self._refuse(431, "too_large", f"request head larger than {front.head_limit} bytes")
                return
            raw = buf[:size]
            if self._serve_repeat(raw, buf[size:]):
                continue
            self._let_go_kept()  # only a repeat of the head that kept it may use it
            try:
                head = front.parser.parse(raw)
            except HeadError as exc:
                self._refuse(exc.status, exc.code, exc.message)
                return
            serve, no_body = front.routes.route(head)
            if no_body is not None and head.body_length:
                self._refuse(400, "bad_request", no_body)
                return
            self.raw = raw
            try:
                self._start(buf[size:], head, serve, head)
            finally:
                self.raw = b""

    def _start(self, rest: bytes, head: RequestHead, serve: Serve, arg: object) -> None:
        """Serve a request whose head is whole (`rest` follows it) with `serve(self, arg)`;
        what it returns is awaited in a task."""
        io = self.io
        if io.reserved and head.path not in OPERATOR_PATHS:  # the door was full
            self._turn_away(self.state.heads.over_capacity())
            return
        io.serving()
        self.buffer = rest
        self.phase = BUSY
        http = self.http
        if http is not None and serve is not forward.serve:  # aiohttp's turn is over
            self.http = None
            http.close()
        try:
            awaited = serve(self, arg)
        except Exception as exc:
            self._failed(head, exc)
            return
        if awaited is not None:
            tasks = self.front.tasks  # kept until done: the loop keeps only weak references
            task = self.front.loop.create_task(self._run(awaited, head))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _run(self, awaited: Awaitable[None], head: RequestHead) -> None:
        try:
            await awaited
        except Exception as exc:
            self._failed(head, exc)

    def _failed(self, head: RequestHead, exc: Exception) -> None:
        """A request served here that raised: refused with its JSON error (500 if unexpected)."""
        if isinstance(exc, PushError):
            limits.count(self.state, exc)
            refusal = answer.refusal(exc)
            if isinstance(exc, HandshakeError):
                refusal[1].extend(exc.headers.items())
        else:
            log.error("unhandled error on %s %s", head.method, head.path, exc_info=exc)
            refusal = 500, [answer.JSON], error_body("internal", "internal server error")
        self.reply(head, *refusal)

    def _refuse(self, status: int, code: str, message: str) -> None:
        """A head the connection cannot serve (the buffer's first): answered with a JSON error,
        without it for a HEAD request, then closed."""
        self._close_with(status, [answer.JSON], error_body(code, message))

    def _turn_away(self, exc: PushError) -> None:
        """Like `_refuse`, with the error's own headers (`Retry-After`)."""
        self._close_with(*answer.refusal(exc))

    def _close_with(self, status: int, headers: Headers, body: bytes) -> None:
        self.phase = DONE
        self.io.serving()
        self.out.write(answer.closing(status, headers, body, self.buffer.startswith(b"HEAD ")))
        self.io.close()

    # -- answering ----------------------------------------------------------------------------

    def remote(self, head: RequestHead) -> str:
        front, peer = self.front, self.io.peer
        if not front.trusted:
            return peer
        forwarded = head.headers.get("x-forwarded-for")
        host = None if peer == "-" else peer
        return client_address(host, [forwarded] if forwarded else [], front.trusted) or "-"

    def closing(self) -> bool:
        return self.out.is_closing()

    def answer(self, head: RequestHead, status: int, headers: Headers, body: bytes | None) -> None:
        """Write a whole answer to `head` (CORS headers added); `finish` follows. A HEAD gets
        the head alone, with the body's `Content-Length`; a body of None has no length."""
        out = self.out
        if out.is_closing():
            return
        headers = answer.with_cors(headers, self.front.cors_headers(head))
        if body is None:
            sent = answer.head(status, headers, head.version, keeps(self.state, head))
        else:
            length = None if status == 204 else len(body)
            sent = answer.head(status, headers, head.version, keeps(self.state, head), length)
            if head.method != "HEAD":
                sent += body
        out.write(sent)
        if self.front.access_log:
            log_request(self.remote(head), head, status, len(sent))

    def reply(
        self, head: RequestHead, status: int, headers: Headers, body: bytes | None = b""
    ) -> None:
        if self.phase != BUSY:
            return
        keep_alive = keeps(self.state, head)
        if headers is answer.JSON_ONLY and body and head.method != "HEAD" and self.front.bare(head):
            out = self.out  # `send`, a call fewer on every publish's 201
            if not out.is_closing():
                out.write(answer.json_whole(status, head.version, keep_alive, body))
        else:
            self.answer(head, status, headers, body)
        self.finish(keep_alive)

    def send(self, data: bytes) -> None:
        out = self.out
        if not out.is_closing():
            out.write(data)

    def finish(self, keep_alive: bool) -> None:
        if self.phase != BUSY:
            return
        self.held = None
        if not keep_alive or self.state.draining or self.out.is_closing():
            self.phase = DONE
            self.io.close()
            return
        self.phase = IDLE
        io = self.io
        io.wait(self.front.timeout)
        if not self.buffer:  # the usual end of a long-poll: nothing sent yet
            # A kept poll awaits its re-poll, held: not resting. Inside `_next`'s loop (a
            # pipelined publisher) the loop says it once it finds the buffer empty.
            if self.kept is None and not self.looping:
                io.waiting(False)
        elif not self._serve_kept(self.buffer):  # a re-poll sent early, or anything else
            self._next()

    def hold(self, held: Held, timeout: float) -> None:
        self.held = held
        self.io.wait(timeout)

    def settle(self, settling: Settling) -> None:
        self.front.after(settling)

    def hand_over(
        self, head: RequestHead, status: int, headers: Headers, chunked: bool = False
    ) -> tuple[asyncio.Transport, bytes] | None:
        if self.out.is_closing():
            return None
        headers = answer.with_cors(headers, self.front.cors_headers(head))
        if status == 101:
            sent = answer.head(status, headers, head.version)
        else:  # a held response: its connection is never reused
            sent = answer.head(status, headers, head.version, False, None, chunked)
        self.out.write(sent)
        if self.front.access_log:
            log_request(self.remote(head), head, status, len(sent))
        self.phase = DONE
        self._let_go_kept()
        rest, self.buffer = self.buffer, b""
        return self.io.give_away(), rest

    def close(self, abort: bool = False) -> None:
        """Close now: the request's handler ends the connection (aiohttp closes it)."""
        self.phase = DONE
        self.io.close(abort)


def keeps(state: ServerState, head: RequestHead) -> bool:
    """Whether the connection stays open after the answer to `head`, as `finish` decides: not
    when the head says close, nor while the server drains."""
    return head.keep_alive and not state.draining
