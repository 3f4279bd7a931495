"""The bench's subscriber connections (`pushserver_bench.arrival`) on real loopback sockets: a
read is timed by when its bytes arrived (the plain client's, when it is read), writes are never
lost, and the peer's close ends it."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from pushserver_bench.arrival import ArrivalTransport, Timed, open_arrival, open_subscriber


class Reader(asyncio.Protocol):
    """Keeps each read with the transport's `arrived` and the time it was read."""

    def __init__(self) -> None:
        self.transport: ArrivalTransport | None = None
        self.reads: list[tuple[float | None, float, bytes]] = []
        self.got = asyncio.Event()
        self.eof = False
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, ArrivalTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.reads.append((self.transport.arrived, time.time(), data))
        self.got.set()

    def eof_received(self) -> None:
        self.eof = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(exc)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock


async def test_a_read_is_timed_by_when_its_bytes_arrived_not_when_they_were_read(
    listener: socket.socket,
) -> None:
    transport, reader = await open_arrival(Reader, *listener.getsockname())
    peer, _ = listener.accept()
    with peer:
        before = time.time()
        peer.sendall(b"x" * 100)
        after = time.time()
        while time.time() < after + 0.01:  # the client is busy: its loop cannot read yet
            pass
        await asyncio.wait_for(reader.got.wait(), 10)
        arrived, read, data = reader.reads[0]
        assert data == b"x" * 100
        assert arrived is not None and before <= arrived <= after < after + 0.01 <= read
        transport.close()
        assert await asyncio.wait_for(reader.lost, 10) is None


async def test_writes_past_the_socket_buffer_all_go_out_and_the_peer_closing_ends_it(
    listener: socket.socket,
) -> None:
    transport, reader = await open_arrival(Reader, "localhost", listener.getsockname()[1])
    peer, _ = listener.accept()
    big = bytes(range(256)) * 16_384  # 4 MiB: far more than a socket buffer takes at once

    def read_all() -> bytes:
        got = bytearray()
        while len(got) < len(big):
            got += peer.recv(1 << 20)
        return bytes(got)

    with peer:
        transport.write(big[:10])
        transport.write(big[10:])
        assert await asyncio.to_thread(read_all) == big
        peer.sendall(b"bye")
        peer.shutdown(socket.SHUT_WR)
        assert await asyncio.wait_for(reader.lost, 10) is None
    assert reader.eof and transport.is_closing()
    assert b"".join(data for _, _, data in reader.reads) == b"bye"
    transport.write(b"after the end")  # dropped, as asyncio's transports drop it


class Plain(Timed):
    """A plain subscriber's protocol: keeps each read with its own clock's time."""

    def __init__(self) -> None:
        self.reads: list[float | None] = []
        self.got = asyncio.Event()
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.plain:
            self.read_at = time.time()
        self.reads.append(self.arrived_on(self.transport))
        self.got.set()


async def test_the_plain_client_times_a_read_when_it_is_made_on_the_loops_transport(
    listener: socket.socket,
) -> None:
    transport, plain = await open_subscriber(Plain, *listener.getsockname(), "127.0.0.3", True)
    assert plain.plain and not isinstance(transport, ArrivalTransport)
    peer, address = listener.accept()
    assert address[0] == "127.0.0.3"  # from the source address it was given
    with peer:
        peer.sendall(b"x")
        sent = time.time()
        while time.time() < sent + 0.01:  # the client is busy: its loop cannot read yet
            pass
        await asyncio.wait_for(plain.got.wait(), 10)
        (read,) = plain.reads
        assert read is not None and read >= sent + 0.01
        transport.close()

    tuned_transport, tuned = await open_subscriber(Plain, *listener.getsockname())
    peer, _ = listener.accept()
    with peer:
        assert not tuned.plain and isinstance(tuned_transport, ArrivalTransport)
        peer.sendall(b"x")
        await asyncio.wait_for(tuned.got.wait(), 10)
        (arrived,) = tuned.reads
        assert arrived is not None and arrived <= time.time()
        tuned_transport.close()
