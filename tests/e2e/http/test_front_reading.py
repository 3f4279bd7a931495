"""When the front end stops reading a connection: bytes that arrive while a request is in
progress are kept, and reading pauses only once they pass --max-head-bytes. A long-poll
client's next poll, arriving in the loop turn its answer went out, costs no pause and resume
(two epoll changes) and is served once the answered poll is done with."""

from __future__ import annotations

import orjson
import pytest

from pushserver.web.front.protocol import FrontProtocol
from pushserver.web.server import Serving

from ...inprocess import get, serving, until


class Transport:
    """Keeps what the server writes and whether it paused reading; no socket."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.pauses = 0
        self.reading = True
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.9", 5555) if name == "peername" else default

    def pause_reading(self) -> None:
        self.pauses += 1
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def connect(server: Serving) -> tuple[FrontProtocol, Transport]:
    transport = Transport()
    conn = FrontProtocol(server.front)
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def cursor_of(answer: bytes) -> str:
    return orjson.loads(answer.partition(b"\r\n\r\n")[2])["cursor"]


async def held_poll(server: Serving, channel: str) -> tuple[FrontProtocol, Transport, str]:
    """A connection holding a poll of `channel` (published to once) at its head, and that
    head's cursor."""
    await server.state.hub.publish([(channel, b'"start"')])
    conn, transport = connect(server)
    conn.data_received(get(f"/lp/{channel}?timeout=0"))
    head = cursor_of(transport.out[-1])
    conn.data_received(get(f"/lp/{channel}?timeout=20&cursor={head}"))
    return conn, transport, head


async def test_a_repoll_sent_before_its_answered_poll_is_done_with_does_not_pause_reading():
    async with serving() as server:
        state = server.state
        conn, transport, _ = await held_poll(server, "rd")
        assert len(state.hub.channels["rd"].waiters) == 1
        await state.hub.publish([("rd", b'"one"')])  # the fan-out answers; done with later
        answer = transport.out[-1]
        assert b'"one"' in answer
        conn.data_received(get(f"/lp/rd?timeout=20&cursor={cursor_of(answer)}"))
        assert (transport.pauses, transport.reading) == (0, True)
        await until(lambda: len(state.hub.channels["rd"].waiters) == 1, "the re-poll held")
        await state.hub.publish([("rd", b'"two"')])
        assert b'"two"' in transport.out[-1]
        assert transport.pauses == 0
        conn.connection_lost(None)


async def test_reading_pauses_once_kept_bytes_pass_the_head_limit_and_resumes_after():
    async with serving(max_head_bytes=4096) as server:
        state = server.state
        conn, transport, head = await held_poll(server, "rd2")
        pipelined = get(f"/lp/rd2?timeout=0&cursor={head}")
        sent = 0
        while sent <= 4096:  # pipelined polls while the first is held
            conn.data_received(pipelined)
            sent += len(pipelined)
            assert transport.reading == (sent <= 4096)
        assert transport.pauses == 1
        await state.hub.publish([("rd2", b'"one"')])
        await until(lambda: transport.reading, "reading resumed once the held poll is done with")
        answers = b"".join(transport.out).count(b"HTTP/1.1 200")
        assert answers == 2 + sent // len(pipelined)  # the first two, then every pipelined one
        conn.connection_lost(None)


@pytest.mark.parametrize("read", ["whole", "in pieces", "with the next request after it"])
async def test_a_repoll_at_the_head_is_held_by_the_kept_poll_however_it_is_read(read: str):
    async with serving() as server:
        state = server.state
        conn, transport, _ = await held_poll(server, "rk")
        (poll,) = state.hub.channels["rk"].waiters
        await state.hub.publish([("rk", b'"one"')])
        await until(lambda: conn.conn.kept is poll, "the answered poll kept by its connection")
        repoll = get(f"/lp/rk?timeout=20&cursor={cursor_of(transport.out[-1])}")
        if read == "whole":
            conn.data_received(repoll)
        elif read == "in pieces":
            conn.data_received(repoll[:9])
            conn.data_received(repoll[9:])
        else:
            conn.data_received(repoll + get("/lp/rk?timeout=0"))
        assert list(state.hub.channels["rk"].waiters) == [poll] and conn.conn.kept is None
        before = len(transport.out)
        await state.hub.publish([("rk", b'"two"')])
        answer = transport.out[before]  # a request after it may be answered in the same turn
        assert b'"two"' in answer and b'"one"' not in answer
        if read == "with the next request after it":
            await until(lambda: len(transport.out) == 4, "the request after it answered")
            assert cursor_of(transport.out[-1]) == cursor_of(answer)
        conn.connection_lost(None)


async def test_pipelined_repolls_behind_the_head_are_each_answered_without_nesting():
    async with serving() as server:
        state = server.state
        conn, transport, _ = await held_poll(server, "rp")
        await state.hub.publish([("rp", b'"one"')])
        behind = cursor_of(transport.out[-1])
        await state.hub.publish([("rp", b'"two"')])  # nobody held: the kept poll is behind
        await until(lambda: conn.conn.kept is not None, "the answered poll kept by its connection")
        answered = len(transport.out)
        conn.data_received(get(f"/lp/rp?timeout=20&cursor={behind}") * 150)
        assert len(transport.out) == answered + 150  # each answered at once, from one read
        assert all(b'"two"' in answer for answer in transport.out[answered:])
        conn.connection_lost(None)
