"""Subscriber connections that know when their bytes arrived, not only when they were read.

The bench's client processes share the machine's cores with the server, so with thousands of
subscribers a client reads an answer a while after the server wrote it, and a latency timed at
the read is partly the client's own. These connections read with `recvmsg` and take the
kernel's receive timestamp of each read (`pushserver_measure.timestamps`), so `arrived` is when
the server sent the bytes, however late the client gets to them.

The plain client (`open_subscriber` with `plain`) measures as any client written with raw
asyncio protocols does: the loop's own transport, and the time `data_received` is called.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import TypeVar

from pushserver_measure.http11 import IP_BIND_ADDRESS_NO_PORT
from pushserver_measure.timestamps import (
    ANCILLARY,
    SWITCH_PAUSE,
    Switch,
    enable,
    stamp,
    switched_on,
)

P = TypeVar("P", bound=asyncio.Protocol)


class Timed(asyncio.Protocol):
    """A subscriber's protocol and its clock. On an `ArrivalTransport` a read arrived when the
    kernel says; a `plain` one notes `read_at = time.time()` first thing in `data_received`, as
    a client on the loop's own transport would."""

    plain = False
    read_at = 0.0

    def arrived_on(self, transport: object) -> float | None:
        """When the bytes being read arrived (None: the transport does not know)."""
        if self.plain:
            return self.read_at
        arrived: float | None = getattr(transport, "arrived", None)
        return arrived


T = TypeVar("T", bound=Timed)
_READ = memoryview(bytearray(1 << 18))
"""Every read lands here first and is copied out at its length: one process's reads run one at
a time, and a fresh 256 KB buffer per read would cost more than the read."""


async def stamping() -> None:
    """Return once received segments are stamped, keeping them so for this process; raises
    NoTimestamps when they are not within `timestamps.SWITCH_WAIT` seconds."""
    if switched_on():
        return
    switch = Switch()
    while not switch.on():
        await asyncio.sleep(SWITCH_PAUSE)


class ArrivalTransport(asyncio.Transport):
    """A connected TCP socket serving an asyncio protocol. Before each `data_received`,
    `arrived` is the kernel's receive time of the last segment read (epoch seconds), or None
    when the read carried no timestamp. Writes go out at once, and are buffered only while the
    socket is full."""

    def __init__(self, sock: socket.socket, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._protocol = protocol
        self._pending = bytearray()
        self._closing = False
        self.arrived: float | None = None
        protocol.connection_made(self)
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            size, ancillary, _, _ = self._sock.recvmsg_into([_READ], ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(exc)
            return
        if not size:
            self._protocol.eof_received()
            self._close(None)
            return
        self.arrived = stamp(ancillary)
        self._protocol.data_received(_READ[:size].tobytes())

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if not self._pending:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._close(exc)
                return
            data = memoryview(data)[sent:]
            if not data:
                return
            self._loop.add_writer(self._sock.fileno(), self._writable)
        self._pending += data

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(exc)
            return
        del self._pending[:sent]
        if not self._pending:
            self._loop.remove_writer(self._sock.fileno())

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._close(None)

    def _close(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        fd = self._sock.fileno()
        self._loop.remove_reader(fd)
        if self._pending:
            self._loop.remove_writer(fd)
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, exc)


async def connected(host: str, port: int, source: str = "", stamped: bool = False) -> socket.socket:
    """A non-blocking TCP socket connected to `host`:`port` with TCP_NODELAY (as uvloop and
    asyncio set it), asking for receive timestamps when `stamped`. From the local address
    `source` when given, its port picked at connect (IP_BIND_ADDRESS_NO_PORT): bound with port
    0, a step's 5,000 connections from one address fail with EADDRINUSE once the steps before
    it left as many in TIME_WAIT, while picked at connect each destination has its own
    ephemeral ports and loopback reuses those in TIME_WAIT."""
    loop = asyncio.get_running_loop()
    family, kind, proto, _, address = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[
        0
    ]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if stamped:
            enable(sock)
        if source:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source, 0))
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def open_arrival(
    factory: Callable[[], P], host: str, port: int, source: str = ""
) -> tuple[ArrivalTransport, P]:
    """Connect to `host`:`port` (from the local address `source` when given) and serve the
    connection with the protocol `factory()` makes. NoTimestamps where the kernel gives none:
    the bench then cannot tell the server's time from its own."""
    await stamping()
    sock = await connected(host, port, source, stamped=True)
    try:
        protocol = factory()
        return ArrivalTransport(sock, protocol), protocol
    except BaseException:
        sock.close()
        raise


async def open_subscriber(
    factory: Callable[[], T], host: str, port: int, source: str = "", plain: bool = False
) -> tuple[asyncio.Transport, T]:
    """`open_arrival`, or with `plain` the loop's own transport, whose protocol times each read
    when `data_received` is called."""
    if not plain:
        return await open_arrival(factory, host, port, source)

    def made() -> T:
        protocol = factory()
        protocol.plain = True
        return protocol

    sock = await connected(host, port, source)
    try:
        transport, protocol = await asyncio.get_running_loop().create_connection(made, sock=sock)
    except BaseException:
        sock.close()
        raise
    return transport, protocol
