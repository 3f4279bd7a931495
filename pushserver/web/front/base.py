"""What the parts of a front-end connection share: its state, one set of slots, and the calls
one part makes on another. `connection.Connection` is made of the parts: the request cycle and
its answers (`connection.py`), request bodies (`bodies.py`) and the re-poll fast path
(`repoll.py`); what it asks of the I/O beneath it is `Io` and `Out`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..transports.exchange import Exchange

if TYPE_CHECKING:
    from ..http.request import RequestHead
    from ..state import ServerState
    from ..transports.exchange import Held, Kept
    from .connection import Connection
    from .forward import Forwarding
    from .protocol import Front
    from .repoll import Repeat

Serve = Callable[["Connection", Any], Awaitable[None] | None]
"""A handler, called with the connection and what it serves (a head, or what it made of one);
the transports' handlers take it as an `Exchange`, which `Connection` derives from."""


class Out(Protocol):
    """Where a connection's answers go: its transport."""

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...


class Io(Protocol):
    """What a connection asks of the I/O beneath it."""

    peer: str
    """The address the connection comes from."""
    transport: asyncio.Transport
    """The socket's transport, for what stands in for it (`forward.Conduit`)."""
    reserved: bool
    """Let in on the operators' reserve (`admission.RESERVE`): only their routes are served."""

    def close(self, abort: bool = False) -> None: ...

    def pause(self) -> None:
        """Stop reading until `resume`."""
        ...

    def resume(self) -> None: ...

    def wait(self, seconds: float) -> None:
        """`Connection.due()` in `seconds` (each call replaces the last)."""
        ...

    def waiting(self, started: bool) -> None:
        """The connection waits for a request head, reading: part of one is here (`started`),
        or none is (kept alive between requests)."""
        ...

    def serving(self) -> None:
        """A whole head is here: the connection no longer waits for one."""
        ...

    def give_away(self) -> asyncio.Transport:
        """Stop being the socket's protocol; the caller makes another one its protocol."""
        ...

    def linger(self) -> None:
        """Half-close, read and drop what still comes, and close a while later, so the client
        reads the answer written last."""
        ...


class Base(Exchange):
    """A connection's state (set and documented in `Connection.__init__`)."""

    __slots__ = (
        "blocked",
        "buffer",
        "front",
        "held",
        "http",
        "io",
        "kept",
        "looping",
        "out",
        "phase",
        "raw",
        "reader",
        "repeat",
        "state",
    )

    front: Front
    state: ServerState
    io: Io
    out: Out
    buffer: bytes
    phase: int
    blocked: bool
    looping: bool
    held: Held | None
    reader: Callable[[bytes], bytes] | None
    raw: bytes
    http: Forwarding | None
    kept: Kept | None
    repeat: Repeat | None

    # What one part calls of another (`Connection` and `Repolls` define them).
    def _start(self, rest: bytes, head: RequestHead, serve: Serve, arg: object) -> None:
        raise NotImplementedError

    def _let_go_kept(self) -> None:
        raise NotImplementedError
