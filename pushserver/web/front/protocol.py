"""The asyncio side of the front end: `FrontProtocol`, each accepted socket's protocol, and
`Front`, what the connections of one server share.

`FrontProtocol` is a thin adapter between a transport and a `connection.Connection`: it passes
the bytes read and the transport's events on, and does for the connection what needs the loop
or the socket (the `connection.Io` it is to it): close, pause and resume reading, a deadline on
the front end's timer wheel (`wheel.py`), the door's counts (`admission.HeadGuard`: a
connection waiting for its head, or kept alive between requests), and the socket given away.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, cast

from ...core.errors import Unavailable
from ..admission import LINGER
from ..cors import Cors
from ..http import answer
from ..http.parser import HeadParser
from ..http.request import RequestHead
from . import IDLE
from .connection import Connection
from .repoll import Repeats
from .routes import Routes
from .wheel import Bucket, Wheel

if TYPE_CHECKING:
    from ..state import ServerState
    from ..transports.exchange import Settling, Transport

log = logging.getLogger("pushserver")

OUT: Final = 0
"""How the door counts a connection (`FrontProtocol.door`): out of its counts (`OUT`), reading
a head (`HEAD`), or resting between requests (`RESTING`)."""
HEAD: Final = 1
RESTING: Final = 2


class Front:
    """What the front end's connections of one server share."""

    def __init__(
        self,
        state: ServerState,
        http: Callable[[], asyncio.Protocol],
        transports: Iterable[Transport],
    ) -> None:
        settings = state.settings
        self.state = state
        self.guard = state.heads
        """Counts the connections receiving a head (`admission.HeadGuard`)."""
        self.http = http
        """Makes an aiohttp protocol for a request the front end does not serve (`forward`)."""
        self.routes = Routes(transports)
        self.loop = asyncio.get_running_loop()
        self.clock: Callable[[], float] = self.loop.time
        """The loop's clock, read twice per long-poll delivery: its method looked up once (the
        compiled build looks a method of the loop up by name at every call)."""
        self.parser = HeadParser(
            settings.max_line_size, settings.max_field_size, settings.max_headers
        )
        self.head_limit = settings.max_head_bytes
        self.timeout = settings.request_timeout
        self.cors = Cors(settings.cors_origins) if settings.cors_origins else None
        self.trusted = settings.trusted_networks
        self.access_log = settings.access_log
        self.connections: dict[FrontProtocol, None] = {}
        self.repeats = Repeats(settings.max_line_size)
        self.wheel = Wheel(self.loop)
        """The deadlines of every connection: idle waits and held polls' hold times."""
        self.tasks: set[asyncio.Task[None]] = set()
        """Requests being served in a task (a body still to come, a broker to wait for)."""
        self.settling: list[Settling] = []
        """Long-polls answered in this loop turn, to be done with after it (`after`)."""

    def after(self, settling: Settling) -> None:
        """`settling.done()` once the current callback (a fan-out loop) has returned: every
        poll answered in one loop turn is done with in one pass, at the end of the flush that
        answered them when one is running (no loop turn of its own), else in a loop callback."""
        if not self.settling and not self.state.hub.after_flush(self._settle):
            self.loop.call_soon(self._settle)
        self.settling.append(settling)

    def _settle(self) -> None:
        settling, self.settling = self.settling, []
        for one in settling:
            try:
                one.done()
            except Exception:  # one poll's failure is not the others'
                log.exception("finishing an answered long-poll")

    def bare(self, head: RequestHead) -> bool:
        """Whether the answer to `head` goes without CORS headers and an access log line, so
        prebuilt bytes can be written for it."""
        return not self.access_log and not (self.cors and "origin" in head.headers)

    def cors_headers(self, head: RequestHead) -> list[tuple[str, str]]:
        cors = self.cors
        if cors is None:
            return []
        return list(cors.headers(head.headers.get("origin")).items())

    def close_idle(self) -> None:
        """Shutdown: close connections waiting for a request."""
        for conn in list(self.connections):
            if conn.conn.phase == IDLE:
                conn.transport.close()


class FrontProtocol(asyncio.Protocol):
    """One accepted socket: its transport, its reading and writing paused or not, its deadline
    on the wheel and its place in the door's counts, for its `Connection`."""

    __slots__ = (
        "bucket",
        "conn",
        "deadline",
        "door",
        "front",
        "paused",
        "peer",
        "reserved",
        "transport",
    )

    __deletable__ = ("conn",)

    def __init__(self, front: Front) -> None:
        self.front = front
        self.paused = False
        self.bucket: Bucket | None = None
        """Where this connection waits on `front.wheel` for its deadline."""
        self.deadline = 0.0
        self.peer = "-"
        self.door = OUT
        """How the door counts it (`admission.HeadGuard`): as receiving a head (`HEAD`), as
        kept alive and waiting for its next request (`RESTING`), or not at all (`OUT`)."""
        self.reserved = False
        """Let in on the operators' reserve (`admission.RESERVE`)."""

    # -- the transport's callbacks ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass
        peer = transport.get_extra_info("peername")
        # Interned: the connections of one client address (a proxy, a NAT) share one string.
        self.peer = sys.intern(str(peer[0])) if isinstance(peer, tuple | list) else "-"
        front = self.front
        guard = front.guard
        refused = guard.enter(self, self.peer, front.clock())
        if refused is not None:
            transport.write(answer.closing(*answer.refusal(refused)))
            self._give_up()
            return
        front.connections[self] = None
        self.conn = Connection(front, self, transport)
        self.waiting(True)
        self.wait(guard.head_timeout())

    def data_received(self, data: bytes) -> None:
        if self.door == RESTING:
            self._stir()
        self.conn.receive(data)

    def pause_writing(self) -> None:
        self.conn.writable(False)

    def resume_writing(self) -> None:
        self.conn.writable(True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave()
        self.conn.lost(exc)
        del self.conn  # no cycle with it left for the collector

    def _leave(self) -> None:
        """This protocol is done with the socket (lost, or given away)."""
        self._stir()
        self.serving()
        front = self.front
        if self.reserved:
            front.guard.served(self)
        front.connections.pop(self, None)
        front.wheel.cancel(self)

    # -- what the connection asks (`connection.Io`) -----------------------------------------

    def close(self, abort: bool = False) -> None:
        if abort:
            self.transport.abort()
        else:
            self.transport.close()

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self.transport.resume_reading()

    def wait(self, seconds: float) -> None:
        front = self.front
        front.wheel.wake(self, front.clock() + seconds)

    def due(self) -> None:
        """From the wheel: the deadline `wait` set is met."""
        self.conn.due()

    def waiting(self, started: bool) -> None:
        if self.paused:
            self.paused = False
            self.transport.resume_reading()
        door = self.door
        if started:
            if door != HEAD:
                if door == RESTING:
                    self._stir()
                self.door = HEAD
                front = self.front
                front.guard.start(self, self.peer, front.clock())
        elif door == OUT:
            # Kept alive, waiting for the next request: counted with the unfinished heads (a
            # socket held like any other), and among the first to go when the server needs room.
            self.door = RESTING
            front = self.front
            front.guard.rest(self, self.peer, front.clock())

    def serving(self) -> None:
        if self.door == HEAD:
            self.door = OUT
            guard = self.front.guard
            guard.finish(self, self.peer)
            if self.reserved:
                guard.served(self)

    def _stir(self) -> None:
        if self.door == RESTING:
            self.door = OUT
            self.front.guard.stir(self, self.peer)

    def give_way(self) -> None:
        """Close this connection, waiting for a request head, to make room; it no longer counts
        from now on (`HeadGuard.make_room`). One that never finished a head is told why."""
        if self.door == HEAD:
            refused = Unavailable("over_capacity", "too many connections with unfinished requests")
            self.transport.write(answer.closing(*answer.refusal(refused)))
        self._leave()
        self.conn.close()

    def give_away(self) -> asyncio.Transport:
        self._leave()
        self.resume()
        del self.conn  # no longer its protocol: no cycle with it left
        return self.transport

    def linger(self) -> None:
        self._leave()
        del self.conn
        self._give_up()

    def _give_up(self) -> None:
        """Half-closed a while, what the client still sends read and dropped, so closing does
        not reset the connection under the answer written last."""
        transport = self.transport
        transport.set_protocol(Discard())
        transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self.front.loop.call_later(LINGER, transport.close)


class Discard(asyncio.Protocol):
    """A refused connection's last seconds: what the client still sends is read and dropped."""

    def data_received(self, data: bytes) -> None:
        pass
