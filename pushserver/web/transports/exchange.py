"""The contract between the front end and the handlers it routes requests to.

Two sides. `Exchange` is what a handler (a subscribe transport, the publish handler) may ask of
the connection its request came on: nothing else, and no attribute of the connection is
assigned from outside it. `Transport` is what the front end knows of a subscribe transport: one
record each, listed in `web/transports/__init__.REGISTRY`.

A record names the transport twice, for two readers: its path segment (`lp` in `/lp/news`) for
clients, its name (`longpoll`) for operators (`/stats`, `/metrics`, the connection counts). It
gives the handler that serves a `GET`, the checks that answer a `HEAD` the way that `GET` would
begin (RFC 9110 section 9.3.2), and the framings its events go out in (none for long-poll, whose
answer is one JSON body).

`Exchange`, and `Kept` and `Settling` (what an answered long-poll is to its connection), are
mypyc traits that `Connection` and the polls derive from, not `Protocol`s: the compiled build
calls a method of a `Protocol`-typed value by name (a type lookup, a bound call, its arguments
parsed again), about a dozen times per long-poll delivery. As traits those calls go straight to
the compiled method (docs/performance.md, "Calls by name").
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from mypy_extensions import trait

from ...wire.framing import Framing
from ..http.body import Body
from ..http.request import RequestHead

if TYPE_CHECKING:
    from ..front.repoll import Again
    from ..state import ServerState

Headers = list[tuple[str, str]]


class Held(Protocol):
    """What a connection holds while its request waits (a long-poll, a body being read)."""

    def expire(self) -> None:
        """Its time (`Exchange.hold`) is up."""
        ...

    def lost(self) -> None:
        """The client left."""
        ...


@trait
class Settling:
    """Something to finish once the loop callback that answered it (a fan-out) is over."""

    __slots__ = ()

    def done(self) -> None:
        raise NotImplementedError


@trait
class Kept:
    """What an answered request left on its connection for the next one to reuse
    (`Exchange.keep`)."""

    __slots__ = ()

    def let_go(self) -> None:
        raise NotImplementedError

    def awaits(self) -> str:
        """The value of the remembered head's parameter it is most likely asked with next."""
        raise NotImplementedError


@trait
class Exchange:
    """A connection as a request handler sees it, one request at a time.

    Answering: `reply` (a whole answer, then the next request), or `answer`/`send` and later
    `finish` (a long-poll answered inside a fan-out), or `hand_over` (a held stream or an
    upgrade takes the socket). Waiting: `hold` (with a deadline), `settle`. Request bodies:
    `body`, `read_rest`, `refuse_unread`. The re-poll fast path (`front/repoll.py`):
    `remember`, `keep`, `take_kept`.
    """

    __slots__ = ()

    state: ServerState

    def remote(self, head: RequestHead) -> str:
        """The client's address (from `X-Forwarded-For` when the peer is a trusted proxy)."""
        raise NotImplementedError

    def closing(self) -> bool:
        """Whether the connection is closing: nothing written now reaches the client."""
        raise NotImplementedError

    def reply(
        self, head: RequestHead, status: int, headers: Headers, body: bytes | None = b""
    ) -> None:
        """Answer `head` and go on with the next request (`finish`). A body of None: the head
        a `GET` would begin with, no `Content-Length` (a `HEAD` on a held path)."""
        raise NotImplementedError

    def answer(self, head: RequestHead, status: int, headers: Headers, body: bytes) -> None:
        """Write a whole answer to `head`; `finish` follows."""
        raise NotImplementedError

    def send(self, data: bytes) -> None:
        """Write a whole answer built beforehand (its head included); `finish` follows."""
        raise NotImplementedError

    def finish(self, keep_alive: bool) -> None:
        """The request is answered: read the next one, or close (not kept alive, draining)."""
        raise NotImplementedError

    def hold(self, held: Held, timeout: float) -> None:
        """Hold `held` until answered, told when the client leaves (`lost`) and expired after
        `timeout` seconds (`expire`)."""
        raise NotImplementedError

    def settle(self, settling: Settling) -> None:
        """`settling.done()` once the current loop callback has returned."""
        raise NotImplementedError

    def hand_over(
        self, head: RequestHead, status: int, headers: Headers, chunked: bool = False
    ) -> tuple[asyncio.Transport, bytes] | None:
        """Send the head of a held response (or of a 101) and give the socket away, with the
        bytes read after the request (None: the client left)."""
        raise NotImplementedError

    def body(self, length: int, limit: int, coding: str | None) -> bytes | Body:
        """The request's body of `length` bytes (-1: chunked): its bytes when it came whole
        with the head (within `limit`, no content coding), else a `Body` fed what is here."""
        raise NotImplementedError

    def read_rest(self, body: Body, expect: bool) -> Awaitable[None] | None:
        """Read the rest of `body` as it comes (after `100 Continue` when `expect`), within
        `--request-timeout`: what to await until it is over (None: it is), which raises
        ConnectionError when the client leaves or stalls first."""
        raise NotImplementedError

    def refuse_unread(self, head: RequestHead, status: int, headers: Headers, body: bytes) -> None:
        """Answer a request whose body is (partly) unread, then close: half-closed a while,
        the rest read and dropped, so the client reads the answer."""
        raise NotImplementedError

    def remember(self, head: RequestHead, name: str | None, parsed: Again) -> None:
        """Serve the next head that is this one but for query parameter `name` (None: the
        very same head) with `parsed.again`, without parsing it."""
        raise NotImplementedError

    def keep(self, kept: Kept) -> None:
        """Leave `kept` for the next request if it repeats the remembered head."""
        raise NotImplementedError

    def take_kept(self) -> Kept | None:
        raise NotImplementedError


Handler = Callable[[Exchange, RequestHead], Awaitable[None] | None]
"""Serves a request: at once, or in what it returns (awaited in a task)."""
Check = Callable[[Exchange, RequestHead], Headers]
"""A `HEAD`'s checks: its `GET`'s, in the same order, raising what that `GET` would be refused
with; the headers of the head that `GET` would begin its answer with."""


@dataclasses.dataclass(frozen=True, slots=True)
class Transport:
    segment: str
    """The path's first segment: `/{segment}/{channels}`."""
    name: str
    """The name operators see: `/stats`, `/metrics`, the connection counts and limits."""
    serve: Handler
    probe: Check
    framings: tuple[Framing, ...] = ()
    """How its events are framed, each framing named `name` (the hub counts deliveries by
    framing name)."""

    def __post_init__(self) -> None:
        if any(framing.name != self.name for framing in self.framings):
            raise ValueError(f"transport {self.name!r} has a framing of another name")
